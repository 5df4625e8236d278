package service

import (
	"bytes"
	"embed"
	"encoding/xml"
	"fmt"
	"strings"
	"text/template"

	"github.com/cairn-dev/cairn/platform"
)

// Kind is the service manager a unit is written for.
type Kind string

const (
	KindSystemd Kind = "systemd"
	KindSysV    Kind = "sysv"
	KindLaunchd Kind = "launchd"
)

// Unit is what a rendered unit, script or plist names.
type Unit struct {
	Name       string        // service name (launchd: the label)
	Mode       platform.Mode // system or user
	Executable string        // absolute path of the cairn binary
	ConfigPath string        // the config file the daemon reads
	LogPath    string        // SysV and launchd: the file stdout/stderr are appended to
}

//go:embed templates
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"sd":  systemdQuote,
	"sh":  shellQuote,
	"xml": xmlEscape,
}).ParseFS(templateFS, "templates/*.tmpl"))

var templateFor = map[Kind]string{
	KindSystemd: "systemd.service.tmpl",
	KindSysV:    "sysv.sh.tmpl",
	KindLaunchd: "launchd.plist.tmpl",
}

// Render is cairn's own unit file, init script or plist for a service manager:
// exactly the bytes `cairn service install` writes.
func Render(k Kind, u Unit) ([]byte, error) {
	name, ok := templateFor[k]
	if !ok {
		return nil, fmt.Errorf("no template for service manager %q", k)
	}
	if k == KindSysV && u.Mode == platform.ModeUser {
		return nil, fmt.Errorf("SysV init has no per-user services; install without --user")
	}
	data := struct {
		Unit
		Mode string
	}{u, u.Mode.String()}
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		return nil, fmt.Errorf("render %s unit: %w", k, err)
	}
	// kardianos parses what we hand it as a template again: it must hold no actions.
	if bytes.Contains(b.Bytes(), []byte("{{")) {
		return nil, fmt.Errorf("render %s unit: a path contains %q", k, "{{")
	}
	return b.Bytes(), nil
}

// systemdQuote quotes one ExecStart word: systemd splits on spaces, unquotes
// "…" with C escapes and expands $VAR; % specifiers are left to systemd.
func systemdQuote(s string) string {
	s = strings.ReplaceAll(s, "$", "$$")
	if s != "" && !strings.ContainsAny(s, " \t\"'\\;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// shellQuote single-quotes a word for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
