package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/platform"
)

// turnState is one session's (one run's) turn count, kept between hook
// calls in the user's state directory: $XDG_STATE_HOME/cairn/hooks/<run>.json
// (~/.local/state/cairn/hooks without XDG_STATE_HOME).
type turnState struct {
	Turn   int    `json:"turn"`
	Prompt string `json:"prompt,omitempty"` // the turn's label: its request's first line
}

// fileTurns keeps turn states as files in dir.
type fileTurns struct{ dir string }

// hookStateDir is where turn states live.
func hookStateDir() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" || !filepath.IsAbs(base) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no state directory for turn counts: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "cairn", "hooks"), nil
}

// load reads run's state; a run never seen is turn 0.
func (f fileTurns) load(run string) (turnState, error) {
	var st turnState
	if f.dir == "" {
		return st, errors.New("no state directory for turn counts")
	}
	file, err := os.OpenFile(filepath.Join(f.dir, run+".json"), os.O_RDONLY|platform.NoFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("turn count of %s: %w", run, err)
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, 64<<10))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	if err != nil || st.Turn < 0 {
		return turnState{}, fmt.Errorf("turn count of %s: unreadable, counting afresh", run)
	}
	return st, nil
}

// save writes run's state atomically (a temporary file renamed over it),
// readable by the user alone.
func (f fileTurns) save(run string, st turnState) error {
	if f.dir == "" {
		return errors.New("no state directory for turn counts")
	}
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return fmt.Errorf("turn counts: %w", err)
	}
	b, _ := json.Marshal(st)
	tmp, err := os.CreateTemp(f.dir, "."+run+".*.tmp") // 0600
	if err != nil {
		return fmt.Errorf("turn count of %s: %w", run, err)
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(f.dir, run+".json"))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("turn count of %s: %w", run, err)
	}
	return nil
}
