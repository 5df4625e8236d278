//go:build linux

package snapshot

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/platform/testsupport"
	"github.com/cairn-dev/cairn/restore/ckpt"
)

// fillDisk writes a file under dir until the file system is full and returns it.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return p
		}
	}
}

// ledgerLines reads the ledger file: every non-blank line must parse, and
// the file must end with a newline (nothing torn).
func ledgerLines(t *testing.T, path string) []ckpt.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("ledger ends in a torn line: %q", b[max(0, bytes.LastIndexByte(b, '\n')+1):])
	}
	var recs []ckpt.Record
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var r ckpt.Record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Errorf("ledger line does not parse (%v): %q", err, l)
			continue
		}
		recs = append(recs, r)
	}
	return recs
}

func tmpObjects(t *testing.T, gitDir string) []string {
	t.Helper()
	a, _ := filepath.Glob(filepath.Join(gitDir, "objects", "??", "tmp_obj_*"))
	b, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "tmp_*"))
	return append(a, b...)
}

func ids(recs []ckpt.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.ID)
	}
	return out
}

// TestSealDiskFull seals on a store whose disk is full: every failed seal is
// kept (in memory, then in the ledger once it can be written), the ledger is
// never left torn, no id is handed out twice (not even by another opening of
// the store), and git's empty temporary objects are swept.
func TestSealDiskFull(t *testing.T) {
	ctx := context.Background()
	state := testsupport.MountTmpfs(t, "2m")
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"a.txt": "a\n"})
	st := openTestStore(t, ws, Options{StateDir: state})
	requireOK(t, mustSeal(t, st, SealRequest{Kind: ckpt.KindBaseline}))

	// Pad the ledger with blank lines (valid: they are skipped) to 10 bytes
	// short of a page, so the next append writes those 10 bytes and then
	// needs a page the full disk does not have: a short write.
	ledger := st.LedgerPath()
	fi, err := os.Stat(ledger)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	target := (fi.Size()/page+1)*page - 10
	f, err := os.OpenFile(ledger, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("\n"), int(target-fi.Size()))); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for i := range 40 {
		b := make([]byte, 16<<10)
		rand.Read(b)
		writeFile(t, ws, fmt.Sprintf("big/%02d.bin", i), string(b), 0o644)
	}
	filler := fillDisk(t, state)

	var failed []ckpt.Record
	for i := range 3 {
		rec, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Label: fmt.Sprintf("full %d", i)})
		if err == nil || rec.State != ckpt.StateFailed {
			t.Fatalf("seal on a full disk: %+v, %v", rec, err)
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("the ledger's append error does not say ENOSPC: %v", err)
		}
		failed = append(failed, rec)
		if left := tmpObjects(t, st.GitDir()); len(left) > 0 {
			t.Errorf("after failed seal %s: %d temporary objects left, e.g. %s", rec.ID, len(left), left[0])
		}
		ledgerLines(t, ledger)
		if fi, err := os.Stat(ledger); err != nil || fi.Size() != target {
			t.Errorf("after failed seal %s: ledger is %d bytes, want %d (the failed append truncated back)", rec.ID, fi.Size(), target)
		}
	}
	if got := ids(failed); !slices.Equal(got, []string{"c2", "c3", "c4"}) {
		t.Errorf("failed seals took ids %v, want c2 c3 c4 (each handed out once)", got)
	}
	// The failed records are kept by the store that sealed them.
	recs := st.Records()
	if got := ids(recs); !slices.Equal(got, []string{"c1", "c2", "c3", "c4"}) {
		t.Errorf("records on a full disk: %v", got)
	}
	for _, r := range recs[1:] {
		if r.State != ckpt.StateFailed || r.Error == "" {
			t.Errorf("record %s: state %s, error %q", r.ID, r.State, r.Error)
		}
	}

	// Another opening of the store (another process) never sees those
	// records in the file, yet must not hand their ids out again.
	other := openTestStore(t, ws, Options{StateDir: state})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	rec := mustSeal(t, other, SealRequest{Kind: ckpt.KindManual, Label: "other"})
	if rec.ID != "c5" {
		t.Errorf("seal by another opening after the failures took %s, want c5", rec.ID)
	}
	// The first store writes what it kept before its next record.
	rec = mustSeal(t, st, SealRequest{Kind: ckpt.KindManual, Label: "room again"})
	if rec.ID != "c6" || rec.State != ckpt.StateOK {
		t.Errorf("seal with room again: %s %s, want c6 ok", rec.ID, rec.State)
	}
	onDisk := ledgerLines(t, ledger)
	got := ids(onDisk)
	slices.Sort(got)
	if !slices.Equal(got, []string{"c1", "c2", "c3", "c4", "c5", "c6"}) {
		t.Errorf("ledger ids on disk %v, want c1…c6 once each", ids(onDisk))
	}
	again := openTestStore(t, ws, Options{StateDir: state})
	recs = again.Records()
	if got := ids(recs); !slices.Equal(got, []string{"c1", "c2", "c3", "c4", "c5", "c6"}) {
		t.Errorf("reopened ledger, oldest first: %v", got)
	}
	for _, r := range recs {
		if want := slices.Contains([]string{"c2", "c3", "c4"}, r.ID); want != (r.State == ckpt.StateFailed) {
			t.Errorf("reopened record %s: state %s", r.ID, r.State)
		}
	}
	if out, err := st.git.Run(ctx, nil, "fsck", "--no-progress", "--no-dangling"); err != nil ||
		strings.Contains(string(out), "garbage") {
		t.Errorf("git fsck: %v\n%s", err, out)
	}
}

// TestLedgerTornTailRepairedBeforeAppend: a torn line left at the end of the
// ledger (an append cut short whose truncation also failed) is cut off before
// the next append, so that append is a whole line of its own.
func TestLedgerTornTailRepairedBeforeAppend(t *testing.T) {
	ws, st := newTestStore(t, Options{})
	writeTree(t, ws, map[string]string{"a.txt": "a"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	f, err := os.OpenFile(st.LedgerPath(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"id":"c9","kind":"man`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Appended within the lock, as a seal's second append (after a flush) would be.
	if err := st.withLock(context.Background(), func() error {
		return st.appendRecord(ckpt.Record{ID: "c2", Kind: ckpt.KindManual, State: ckpt.StateFailed, Error: "x", Time: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	if got := ids(ledgerLines(t, st.LedgerPath())); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Errorf("ledger after a torn tail and an append: %v", got)
	}
}

// TestOpenSweepsStaleTmpObjects: temporary object files git left behind are
// removed when the store is opened, unless young enough to be another
// writer's work in progress. A pack without its index is not one: it is
// indexed, or (this one, empty) moved into the quarantine.
func TestOpenSweepsStaleTmpObjects(t *testing.T) {
	ws, st := newTestStore(t, Options{})
	writeTree(t, ws, map[string]string{"a.txt": "a"})
	mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	objs := filepath.Join(st.GitDir(), "objects")
	old := time.Now().Add(-time.Hour)
	var stale, young []string
	// A pack without its index (a crash between the two names) is
	// invisible to git; it may hold a checkpoint's only copy of an object.
	orphan, kept := "pack/pack-"+strings.Repeat("1", 40)+".pack", "pack/pack-"+strings.Repeat("2", 40)
	for _, p := range []string{"ab/tmp_obj_old1", "ab/tmp_obj_old2", "pack/tmp_pack_old", "pack/tmp_idx_old", orphan} {
		stale = append(stale, filepath.Join(objs, p))
	}
	young = append(young, filepath.Join(objs, "ab/tmp_obj_young"), filepath.Join(objs, "pack/tmp_pack_young"),
		filepath.Join(objs, "pack/pack-"+strings.Repeat("3", 40)+".pack"))
	// Old files whose names are not quite a temporary file's are not cairn's to remove.
	foreign := []string{filepath.Join(objs, "ab/tmp_obj_x.keep"), filepath.Join(objs, "pack/tmp_packs"), filepath.Join(objs, "pack/notes.txt")}
	for _, p := range append(append(append([]string(nil), stale...), young...), foreign...) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	// An old pack with its index is a pack: it stays.
	var keep []string
	for _, ext := range []string{".pack", ".idx"} {
		p := filepath.Join(objs, kept+ext)
		if err := os.WriteFile(p, nil, 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, p)
	}
	for _, p := range append(append([]string(nil), stale...), foreign...) {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	openTestStore(t, ws, Options{StateDir: stateDirOf(st)})
	for _, p := range stale {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("stale %s not swept at open", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(st.GitDir(), cairnSubdir, quarantineSubdir, "objects", filepath.FromSlash(orphan))); err != nil {
		t.Errorf("the pack without its index git cannot index is not in the quarantine: %v", err)
	}
	for _, p := range foreign {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s, not a temporary file's name, swept: %v", p, err)
		}
	}
	for _, p := range young {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("young %s swept: %v", p, err)
		}
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("old pack with its index %s swept: %v", p, err)
		}
	}
}

// TestOpenDiskFullRecovers: a checkpoint git holds but the ledger lacks is
// re-recorded at open even when the disk is full: kept in memory, written
// once there is room, and the store opens.
func TestOpenDiskFullRecovers(t *testing.T) {
	ctx := context.Background()
	state := testsupport.MountTmpfs(t, "2m")
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"a.txt": "a\n"})
	st := openTestStore(t, ws, Options{StateDir: state})
	rec := mustSeal(t, st, SealRequest{Kind: ckpt.KindManual})
	// The ledger loses its record (one full page of blank lines instead), so
	// re-recording it needs a page the full disk does not have.
	if err := os.WriteFile(st.LedgerPath(), bytes.Repeat([]byte("\n"), 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	filler := fillDisk(t, state)
	full, err := Open(ctx, ws, Options{Layout: LayoutPlain, StateDir: state})
	if err != nil {
		t.Fatalf("open on a full disk with a record to recover: %v", err)
	}
	if recs := full.Records(); len(recs) != 1 || recs[0].SHA != rec.SHA || !recs[0].Recovered {
		t.Errorf("records on a full disk: %+v", recs)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := full.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(ledgerLines(t, st.LedgerPath())); !slices.Equal(got, []string{"c1"}) {
		t.Errorf("ledger once there is room: %v", got)
	}
}
