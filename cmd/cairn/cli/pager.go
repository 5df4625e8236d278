package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/mattn/go-isatty"
)

// defaultPager is what cairn diff pages through when $PAGER is unset: less
// that exits when the text fits one screen (-F), passes colours (-R) and
// leaves the text on screen (-X).
const defaultPager = "less -FRX"

// pagerCommand is the pager for w: $PAGER (default less -FRX) when w is a
// terminal, none otherwise (a pipe, a file) or when $PAGER is empty or cat.
func pagerCommand(w io.Writer) string {
	f, ok := w.(*os.File)
	if !ok || !isatty.IsTerminal(f.Fd()) {
		return ""
	}
	p, set := os.LookupEnv("PAGER")
	if !set {
		p = defaultPager
	}
	if p = strings.TrimSpace(p); p == "" || p == "cat" {
		return ""
	}
	return p
}

// page writes text through the pager cmd (run by sh, as git runs $PAGER),
// or straight to w when cmd is empty or the pager cannot start. The pager
// gets LESS=FRX when LESS is unset, as git sets it.
func page(w io.Writer, cmd, text string) error {
	if cmd == "" {
		_, err := io.WriteString(w, text)
		return err
	}
	c := exec.Command("sh", "-c", cmd)
	c.Stdout, c.Stderr = w, os.Stderr
	if _, ok := os.LookupEnv("LESS"); !ok {
		c.Env = append(os.Environ(), "LESS=FRX")
	}
	in, err := c.StdinPipe()
	if err != nil {
		_, err := io.WriteString(w, text)
		return err
	}
	if err := c.Start(); err != nil {
		_, err := io.WriteString(w, text)
		return err
	}
	_, _ = io.WriteString(in, text) // a pager quit early (q in less): EPIPE, not an error
	in.Close()
	if err := c.Wait(); err != nil {
		return fmt.Errorf("pager %q: %w", cmd, err)
	}
	return nil
}

// colourPatch paints a unified diff as git does: headers bold, hunks cyan,
// added lines green, removed lines red. text is already escaped (every
// control character of a user's file shown as text), so the only escape
// sequences in the result are these.
func colourPatch(p palette, text string) string {
	if !p {
		return text
	}
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		body := strings.TrimSuffix(l, "\n")
		nl := l[len(body):]
		switch {
		case strings.HasPrefix(body, "diff --git "), strings.HasPrefix(body, "+++ "), strings.HasPrefix(body, "--- "),
			strings.HasPrefix(body, "index "), strings.HasPrefix(body, "new file mode"), strings.HasPrefix(body, "deleted file mode"):
			body = p.paint("1", body)
		case strings.HasPrefix(body, "@@"):
			body = p.paint(sgrCyan, body)
		case strings.HasPrefix(body, "+"):
			body = p.paint(sgrGreen, body)
		case strings.HasPrefix(body, "-"):
			body = p.paint(sgrRed, body)
		}
		lines[i] = body + nl
	}
	return strings.Join(lines, "")
}

// colourStat paints a diffstat's bars: + green, - red.
func colourStat(p palette, text string) string {
	if !p {
		return text
	}
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		bar := strings.LastIndex(l, "| ")
		if bar < 0 {
			continue
		}
		head, tail := l[:bar+2], l[bar+2:]
		j := strings.IndexAny(tail, "+-")
		if j < 0 {
			continue
		}
		k := j
		for k < len(tail) && (tail[k] == '+' || tail[k] == '-') {
			k++
		}
		run := tail[j:k]
		plus := strings.Count(run, "+")
		lines[i] = head + tail[:j] + p.paint(sgrGreen, run[:plus]) + p.paint(sgrRed, run[plus:]) + tail[k:]
	}
	return strings.Join(lines, "")
}
