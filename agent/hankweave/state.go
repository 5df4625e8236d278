package hankweave

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-dev/cairn/platform"
)

// Codon statuses (docs/runtime-formats.md, "state.json").
const (
	StatusPreparing           = "preparing"
	StatusStarting            = "starting"
	StatusInitializing        = "initializing"
	StatusRunning             = "running"
	StatusCompletingSentinels = "completing-sentinels"
	StatusCompleted           = "completed"
	StatusFailed              = "failed"
	StatusSkipped             = "skipped"
)

// Run statuses.
const (
	RunRunning   = "running"
	RunCompleted = "completed"
	RunFailed    = "failed"
	RunCrashed   = "crashed"
)

// IsTerminal reports whether a codon status is final (completed, failed, skipped).
func IsTerminal(status string) bool {
	return status == StatusCompleted || status == StatusFailed || status == StatusSkipped
}

// State is .hankweave/state.json. Fields cairn does not know stay in Raw and
// are written back untouched by WriteState.
type State struct {
	Runs              []Run       `json:"runs"` // newest first
	CurrentRunID      *string     `json:"currentRunId"`
	ExecutionPlan     []PlanEntry `json:"executionPlan"`
	InitialCheckpoint string      `json:"initialCheckpoint,omitempty"`

	Raw RawObject `json:"-"`

	// Source is the file this state was read from: StateFile, or
	// StateBackupFile when state.json was invalid (then Warning says why).
	Source string `json:"-"`
	// Warning is why state.json itself was not used; nil when it was.
	Warning error `json:"-"`
}

// Run is one execution of the plan.
type Run struct {
	RunID              string             `json:"runId"`
	RunFolder          string             `json:"runFolder"`
	GitBranch          string             `json:"gitBranch"`
	StartingConditions StartingConditions `json:"startingConditions"`
	Codons             []CodonExecution   `json:"codons"` // oldest first; a retry appends a record with the same codonId
	Status             string             `json:"status"`
	StartTime          string             `json:"startTime"`
	EndTime            string             `json:"endTime,omitempty"`
	ServerPID          int                `json:"serverPid"`

	Raw RawObject `json:"-"`
}

// StartingConditions says how a run began: {"type":"fresh"} or a continuation.
type StartingConditions struct {
	Type                 string              `json:"type"` // "fresh" | "continuation"
	Source               *ContinuationSource `json:"source,omitempty"`
	Reason               string              `json:"reason,omitempty"` // "retry" | "rollback" | "continue"
	InitialCheckpointSHA string              `json:"initialCheckpointSha,omitempty"`

	Raw RawObject `json:"-"`
}

// ContinuationSource is where a continuation run resumes from.
type ContinuationSource struct {
	RunID         string  `json:"runId"`
	AfterCodon    *string `json:"afterCodon"` // null: before the first codon (a rig-setup target)
	CheckpointSHA string  `json:"checkpointSha"`

	Raw RawObject `json:"-"`
}

// CodonExecution is one record of a codon in a run.
type CodonExecution struct {
	CodonID       string         `json:"codonId"`
	StartTime     string         `json:"startTime"`
	Status        string         `json:"status"`
	LoopContext   *LoopContext   `json:"loopContext,omitempty"`
	EndTime       string         `json:"endTime,omitempty"`
	ClaudePID     *int           `json:"claudePid,omitempty"`
	ClaudeLogPath string         `json:"claudeLogPath,omitempty"`
	ExitCode      *int           `json:"exitCode,omitempty"`
	FailedDuring  string         `json:"failedDuring,omitempty"`
	FailureReason *FailureReason `json:"failureReason,omitempty"`
	SkippedDuring string         `json:"skippedDuring,omitempty"`
	RigSetupSHA   string         `json:"rigSetupCheckpoint,omitempty"`
	CompletionSHA string         `json:"completionCheckpoint,omitempty"`
	ErrorSHA      string         `json:"errorCheckpoint,omitempty"`
	SkipSHA       string         `json:"skipCheckpoint,omitempty"`

	Raw RawObject `json:"-"`
}

// FailureReason is a failed record's structured reason.
type FailureReason struct {
	Type      string `json:"type"`
	Retriable bool   `json:"retriable"`
	Message   string `json:"message"`

	Raw RawObject `json:"-"`
}

// PlanEntry is one codon of the flattened execution plan (loops expanded:
// codonId "review#1" for the second iteration of codon "review").
type PlanEntry struct {
	Codon       Codon        `json:"codon"`
	CodonID     string       `json:"codonId"`
	LoopContext *LoopContext `json:"loopContext,omitempty"`

	Raw RawObject `json:"-"`
}

// Codon is a codon's configuration as the plan carries it.
type Codon struct {
	ID                string            `json:"id"`
	Name              string            `json:"name,omitempty"`
	CheckpointedFiles []string          `json:"checkpointedFiles,omitempty"`
	RigSetup          []json.RawMessage `json:"rigSetup,omitempty"`
	ArchiveOnSuccess  json.RawMessage   `json:"archiveOnSuccess,omitempty"`

	Raw RawObject `json:"-"`
}

// LoopContext places a plan entry or record in a loop iteration.
type LoopContext struct {
	LoopID           string `json:"loopId"`
	Iteration        int    `json:"iteration"` // 0-based
	CodonIndexInLoop int    `json:"codonIndexInLoop"`

	Raw RawObject `json:"-"`
}

// The (un)marshalers below route every typed struct through RawObject.

func (s State) MarshalJSON() ([]byte, error) { return encodeKnown(s.Raw, s) }
func (s *State) UnmarshalJSON(b []byte) error {
	src, warn := s.Source, s.Warning
	err := decodeKnown(b, &s.Raw, s)
	s.Source, s.Warning = src, warn
	return err
}
func (r Run) MarshalJSON() ([]byte, error)  { return encodeKnown(r.Raw, r) }
func (r *Run) UnmarshalJSON(b []byte) error { return decodeKnown(b, &r.Raw, r) }
func (c StartingConditions) MarshalJSON() ([]byte, error) {
	return encodeKnown(c.Raw, c)
}
func (c *StartingConditions) UnmarshalJSON(b []byte) error { return decodeKnown(b, &c.Raw, c) }
func (c ContinuationSource) MarshalJSON() ([]byte, error)  { return encodeKnown(c.Raw, c) }
func (c *ContinuationSource) UnmarshalJSON(b []byte) error { return decodeKnown(b, &c.Raw, c) }
func (c CodonExecution) MarshalJSON() ([]byte, error)      { return encodeKnown(c.Raw, c) }
func (c *CodonExecution) UnmarshalJSON(b []byte) error     { return decodeKnown(b, &c.Raw, c) }
func (f FailureReason) MarshalJSON() ([]byte, error)       { return encodeKnown(f.Raw, f) }
func (f *FailureReason) UnmarshalJSON(b []byte) error      { return decodeKnown(b, &f.Raw, f) }
func (p PlanEntry) MarshalJSON() ([]byte, error)           { return encodeKnown(p.Raw, p) }
func (p *PlanEntry) UnmarshalJSON(b []byte) error          { return decodeKnown(b, &p.Raw, p) }
func (c Codon) MarshalJSON() ([]byte, error)               { return encodeKnown(c.Raw, c) }
func (c *Codon) UnmarshalJSON(b []byte) error              { return decodeKnown(b, &c.Raw, c) }
func (l LoopContext) MarshalJSON() ([]byte, error)         { return encodeKnown(l.Raw, l) }
func (l *LoopContext) UnmarshalJSON(b []byte) error        { return decodeKnown(b, &l.Raw, l) }

// CurrentRun returns the run currentRunId names, or nil.
func (s *State) CurrentRun() *Run {
	if s == nil || s.CurrentRunID == nil {
		return nil
	}
	return s.Run(*s.CurrentRunID)
}

// Run returns the run with that id, or nil.
func (s *State) Run(runID string) *Run {
	if s == nil {
		return nil
	}
	for i := range s.Runs {
		if s.Runs[i].RunID == runID {
			return &s.Runs[i]
		}
	}
	return nil
}

// PlanIndex returns the index of the plan entry whose codonId is exactly id, or -1.
func (s *State) PlanIndex(codonID string) int {
	if s == nil {
		return -1
	}
	for i := range s.ExecutionPlan {
		if s.ExecutionPlan[i].CodonID == codonID {
			return i
		}
	}
	return -1
}

// Branch is the run's store branch: its gitBranch, or run-<runId> when unset.
func (r *Run) Branch() string {
	if r.GitBranch != "" {
		return r.GitBranch
	}
	return "run-" + r.RunID
}

// InvalidStateError says why a state file cannot be used.
type InvalidStateError struct {
	Path   string
	Reason string
	Err    error // the JSON error, when there was one
}

func (e *InvalidStateError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Path, e.Reason, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Reason)
}

func (e *InvalidStateError) Unwrap() error { return e.Err }

// ErrInvalidState matches (errors.Is) every *InvalidStateError.
var ErrInvalidState = errors.New("invalid state file")

func (e *InvalidStateError) Is(target error) bool { return target == ErrInvalidState }

// ParseState parses the bytes of a state file. It accepts what the runtime's
// own loader accepts: a JSON object whose "runs" and "executionPlan" are
// arrays and whose "currentRunId" is a string or null. Anything inside that
// does not fit is left zero rather than failing. It never panics.
func ParseState(data []byte) (*State, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &InvalidStateError{Reason: "empty file"}
	}
	if !json.Valid(data) {
		return nil, &InvalidStateError{Reason: "not valid JSON (torn or corrupt)", Err: json.Unmarshal(data, new(any))}
	}
	raw, err := parseRawObject(data)
	if err != nil {
		return nil, &InvalidStateError{Reason: "unreadable JSON", Err: err}
	}
	if !raw.IsObject() {
		return nil, &InvalidStateError{Reason: "not a JSON object"}
	}
	if v, ok := raw.Get("runs"); !ok || !isJSONKind(v, '[') {
		return nil, &InvalidStateError{Reason: `"runs" is not an array`}
	}
	if v, ok := raw.Get("executionPlan"); !ok || !isJSONKind(v, '[') {
		return nil, &InvalidStateError{Reason: `"executionPlan" is not an array`}
	}
	if v, ok := raw.Get("currentRunId"); !ok || !(isJSONKind(v, '"') || isJSONKind(v, 'n')) {
		return nil, &InvalidStateError{Reason: `"currentRunId" is neither a string nor null`}
	}
	st := &State{}
	if err := st.UnmarshalJSON(data); err != nil {
		return nil, &InvalidStateError{Reason: "unreadable JSON", Err: err}
	}
	if st.Runs == nil {
		st.Runs = []Run{}
	}
	if st.ExecutionPlan == nil {
		st.ExecutionPlan = []PlanEntry{}
	}
	return st, nil
}

func isJSONKind(v json.RawMessage, first byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == first
}

// ReadState reads <exec>/.hankweave/state.json. When that file is invalid or
// torn it falls back to state.json.bak, as the runtime does; the returned
// state then has Source == StateBackupFile and Warning saying what was wrong
// with state.json. A missing state.json is an error matching fs.ErrNotExist
// (the runtime writes it at its first transition and never removes it).
// When both files are unusable the error is an *InvalidStateError.
func ReadState(execDir string) (*State, error) {
	primary := StatePath(execDir)
	// The workspace's owner controls these files: a link, a FIFO, a device or
	// a huge file is refused rather than followed, waited on or read whole.
	// Both are resolved beneath the execution directory, no folder on the
	// way followed if it is a link.
	exec, err := platform.OpenTree(execDir)
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	defer exec.Close()
	data, err := exec.ReadFile(filepath.Join(HankweaveDir, StateFile), platform.MaxRuntimeFile)
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	st, perr := ParseState(data)
	if perr == nil {
		st.Source = StateFile
		return st, nil
	}
	setPath(perr, primary)
	backup := filepath.Join(execDir, HankweaveDir, StateBackupFile)
	bdata, berr := exec.ReadFile(filepath.Join(HankweaveDir, StateBackupFile), platform.MaxRuntimeFile)
	if berr != nil {
		if errors.Is(berr, fs.ErrNotExist) {
			return nil, perr
		}
		return nil, fmt.Errorf("%w; and the backup: %w", perr, berr)
	}
	bst, bperr := ParseState(bdata)
	if bperr != nil {
		setPath(bperr, backup)
		return nil, fmt.Errorf("%w; and the backup: %w", perr, bperr)
	}
	bst.Source = StateBackupFile
	bst.Warning = perr
	return bst, nil
}

func setPath(err error, path string) {
	var ie *InvalidStateError
	if errors.As(err, &ie) && ie.Path == "" {
		ie.Path = path
	}
}

// MarshalIndent renders the state as the runtime writes it:
// JSON.stringify(state, null, 2), without a trailing newline.
func (s *State) MarshalIndent() ([]byte, error) {
	compact, err := s.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// ErrRuntimeLive is returned by WriteState while the runtime's lock is live.
var ErrRuntimeLive = errors.New("the runtime holds a live lock")

// WriteState rewrites <exec>/.hankweave/state.json with the runtime's own
// protocol: the current file is copied to state.json.bak, the new content is
// written to state.json.tmp (2-space indent) and renamed over state.json.
// Fields cairn does not know are preserved from st's Raw members. Nothing is
// written through a symbolic link: the backup is replaced by rename, the
// temporary file is created exclusively, and a state.json that is a link, not
// a regular file, or over platform.MaxRuntimeFile is refused.
//
// It refuses with ErrRuntimeLive while runtime.lock is live (cairn
// never writes state.json under a running runtime). Files it creates take the
// owner and mode of the existing state.json, so a runtime running as the
// workspace's owner can go on rewriting them after cairn (running as root) did.
func WriteState(execDir string, st *State) error {
	return writeState(execDir, st, time.Now())
}

func writeState(execDir string, st *State, now time.Time) error {
	if st == nil {
		return errors.New("write state: nil state")
	}
	if lk, err := ReadLock(execDir); err == nil && lk.Alive(now) {
		return fmt.Errorf("write state: %w (pid %d)", ErrRuntimeLive, lk.PID)
	}
	body, err := st.MarshalIndent()
	if err != nil {
		return fmt.Errorf("write state: encode: %w", err)
	}
	// Every file below is read, created or replaced in .hankweave, opened
	// once beneath the execution directory with no symbolic link followed
	// (platform.Tree): a root writer never does that through a folder its
	// owner, or anyone who may write there, replaced by a link.
	exec, err := platform.OpenTree(execDir)
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	defer exec.Close()
	dir, err := exec.Sub(HankweaveDir)
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	defer dir.Close()

	mode := fs.FileMode(0o644)
	var like fs.FileInfo
	if f, err := dir.OpenRegular(StateFile); err == nil {
		fi, err := f.Stat()
		var old []byte
		if err == nil {
			old, err = platform.ReadCapped(f, platform.MaxRuntimeFile)
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("write state: %w", err)
		}
		mode, like = fi.Mode().Perm(), fi
		// The runtime copies state.json over the backup in place; cairn
		// replaces it by rename instead, so a link or hard link planted at
		// state.json.bak is replaced, never written through.
		uid, gid := likeOwner(like)
		if err := dir.WriteFileAtomic(StateBackupFile, old, mode, uid, gid); err != nil {
			return fmt.Errorf("write state: backup: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("write state: %w", err)
	}
	_ = dir.Remove(StateTempFile) // a stale one, or a link planted there: unlink never follows
	if err := createFileSync(dir, StateTempFile, body, mode, like); err != nil {
		_ = dir.Remove(StateTempFile)
		return fmt.Errorf("write state: %w", err)
	}
	if err := dir.Rename(StateTempFile, StateFile); err != nil {
		_ = dir.Remove(StateTempFile)
		return fmt.Errorf("write state: %w", err)
	}
	syncDir(dir)
	return nil
}

// createFileSync creates name in dir, which must not exist (O_EXCL: not
// even as a symbolic link, so nothing is written through one), writes data,
// flushes it, and gives it the owner of like.
func createFileSync(dir *platform.Tree, name string, data []byte, mode fs.FileMode, like fs.FileInfo) error {
	f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if like != nil {
		chownLike(f, like)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	return f.Close()
}

// syncDir flushes the folder dir so the rename in it is durable.
func syncDir(dir *platform.Tree) {
	if d, err := dir.OpenFile(".", os.O_RDONLY, 0); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
