package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cairn-dev/cairn/agent"
	"github.com/cairn-dev/cairn/restore"
	"github.com/cairn-dev/cairn/snapshot"
)

func init() {
	register("list", "list a workspace's checkpoints, newest first", runList)
}

// mark is the listing's sign for a kind (README.md, "Commands").
func mark(k snapshot.Kind) string {
	switch k {
	case snapshot.KindBaseline:
		return "─"
	case snapshot.KindCompleted:
		return "✔"
	case snapshot.KindError:
		return "✗"
	case snapshot.KindSkipped:
		return "⊘"
	case snapshot.KindExit:
		return "⏻"
	case snapshot.KindRigSetup:
		return "◆"
	case snapshot.KindAutosave:
		return "·"
	case snapshot.KindPreRestore:
		return "⤿"
	case snapshot.KindManual:
		return "+"
	}
	return "?"
}

func runList(ctx context.Context, e *env, args []string) error {
	fs := newFlags("list", "list <dir> [--json]", e)
	var sf storeFlags
	sf.register(fs)
	asJSON := fs.Bool("json", false, "print the ledger records as JSON, newest first")
	sock := fs.String("socket", "", "daemon socket (default: $CAIRN_SOCKET or the per-user default)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr("list takes one workspace directory")
	}
	recs, head, err := listRecords(ctx, &sf, *sock, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		if recs == nil {
			recs = []snapshot.Record{}
		}
		b, _ := json.MarshalIndent(recs, "", "  ")
		fmt.Fprintln(e.stdout, string(b))
		return nil
	}
	printList(e.stdout, recs, head, time.Now())
	return nil
}

// listRecords is the ledger newest first and the id marked ← HEAD: from the
// daemon when one runs and watches the workspace for us, else from the store.
func listRecords(ctx context.Context, sf *storeFlags, sock, dir string) ([]snapshot.Record, string, error) {
	c, abs, err := daemonFor(ctx, sock, sf.stateDir, dir)
	if err != nil {
		return nil, "", err
	}
	if c != nil {
		l, err := c.List(ctx, abs)
		if err == nil {
			var recs []snapshot.Record
			if b, jerr := json.Marshal(l.Records); jerr == nil {
				_ = json.Unmarshal(b, &recs)
			}
			return recs, l.Head, nil
		}
		if !fallBack(err) {
			return nil, "", err
		}
	}
	st, err := sf.openExisting(ctx, dir)
	if errors.Is(err, snapshot.ErrNoStore) {
		return nil, "", nil // an empty ledger ("no checkpoints yet", or [] with --json), and no store made
	}
	if err != nil {
		return nil, "", err
	}
	defer st.Close()
	recs := st.Records()
	head := restore.HeadMarker(agent.Checkpoints(recs), st.Position())
	slices.Reverse(recs)
	return recs, head, nil
}

func printList(w io.Writer, recs []snapshot.Record, head string, now time.Time) {
	if len(recs) == 0 {
		fmt.Fprintln(w, "no checkpoints yet")
		return
	}
	for _, r := range recs {
		label := r.Label
		if label == "" && r.CodonName != "" {
			label = r.CodonName
		}
		if label == "" {
			label = "—"
		}
		where := "—"
		switch {
		case r.CodonID != "":
			where = r.CodonID + "/" + r.RunID
		case r.RunID != "":
			where = "run " + r.RunID
		}
		line := fmt.Sprintf("%s %-4s %s   %s · %s · %s · %s", mark(r.Kind), r.ID, label, where, orDash(short(r.SHA)), r.Kind, age(now.Sub(r.Time)))
		if r.State != snapshot.StateOK {
			line += " · " + string(r.State)
			if r.Error != "" {
				line += ": " + r.Error
			}
		}
		if head != "" && r.ID == head {
			line += "  " + restore.HeadMark
		}
		fmt.Fprintln(w, line)
	}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
