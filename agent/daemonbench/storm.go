package daemonbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/snapshot/sealbench"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// StormResult is part 3: a burst of writes with autosave on.
type StormResult struct {
	Files     int         `json:"files"` // the workspace before the first storm
	Writes    int         `json:"writes"`
	ForMS     float64     `json:"forMs"`
	QuietMS   float64     `json:"quietMs"`
	MaxWaitMS float64     `json:"maxWaitMs"`
	Runs      []StormRun  `json:"runs"`
	Autosaves float64     `json:"autosavesDuring"` // median over the runs
	Bound     int         `json:"bound"`           // the largest run's bound
	FinalMS   float64     `json:"finalAfterMs"`    // median
	AllEqual  bool        `json:"allEqual"`        // every run's last checkpoint equals the disk
	RSSMiB    float64     `json:"rssMiB"`          // after the last storm
	HWMMiB    float64     `json:"hwmMiB"`          // peak, the baseline included
	Config    stormConfig `json:"config"`
}

type stormConfig struct {
	Quiet   string `json:"autosaveQuiet"`
	MaxWait string `json:"autosaveMaxWait"`
}

// StormRun is one storm.
type StormRun struct {
	Writes   int     `json:"writes"`
	NewFiles int     `json:"newFiles"` // of the writes, files created (in new folders)
	TookMS   float64 `json:"tookMs"`
	// AutosavesDuring are the autosaves that began while the storm lasted;
	// Bound is ⌈storm / max wait⌉, the most the maximum wait allows.
	AutosavesDuring int `json:"autosavesDuring"`
	Bound           int `json:"bound"`
	// Partial are autosaves recorded partial: files changed while sealed.
	Partial    int       `json:"partial"`
	AutosaveMS []float64 `json:"autosaveMs"` // their seal times
	// FinalAfterMS runs from the storm's end to the final autosave sealed
	// (its start plus its duration, from the ledger): the quiet period plus
	// the seal.
	FinalAfterMS float64   `json:"finalAfterMs"`
	FinalSealMS  float64   `json:"finalSealMs"`
	Tree         TreeCheck `json:"tree"`
}

// storm writes StormWrites files over StormFor into a plain workspace the
// daemon watches with autosave on, Runs times, and checks after each that
// the final autosave holds exactly the files on disk.
func (b *bench) storm(ctx context.Context) (*StormResult, error) {
	cfg := b.cfg
	root := filepath.Join(b.scratch, "storm", "ws")
	b.logf("storm: generating a tree of %d files", cfg.Files)
	tr, err := makeTree(ctx, root, cfg.Files, 3)
	if err != nil {
		return nil, err
	}
	res := &StormResult{Files: cfg.Files, Writes: cfg.StormWrites, ForMS: ms(cfg.StormFor),
		QuietMS: ms(cfg.StormQuiet), MaxWaitMS: ms(cfg.StormMaxWait), AllEqual: true,
		Config: stormConfig{cfg.StormQuiet.String(), cfg.StormMaxWait.String()}}
	cfgPath, err := b.writeConfig("storm.toml", fmt.Sprintf(
		"[defaults]\nautosave = true\nautosave_quiet = %q\nautosave_max_wait = %q\n", cfg.StormQuiet, cfg.StormMaxWait))
	if err != nil {
		return nil, err
	}
	sealbench.Settle()
	d, err := b.startDaemon("storm", root, cfgPath)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	b.logf("storm: daemon started (pid %d); waiting for its baseline checkpoint", d.pid())
	ws, _, err := d.waitFor(ctx, "the baseline checkpoint", 5*time.Minute, 20*time.Millisecond,
		func(w api.WorkspaceStatus) bool { return w.State == "watching" && w.Seals >= 1 })
	if err != nil {
		return nil, err
	}
	gitDir := ws.Store
	// Opened while the daemon is idle, then only read (Reload) between storms.
	st, err := snapshot.Open(ctx, root, snapshot.Options{Layout: snapshot.LayoutPlain, StateDir: d.state})
	if err != nil {
		return nil, err
	}
	defer st.Close()

	var autosaves, finals []float64
	for r := range cfg.Runs {
		sealbench.Settle()
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
		b.logf("storm: run %d/%d: %d writes over %s", r+1, cfg.Runs, cfg.StormWrites, cfg.StormFor)
		start := time.Now()
		newFiles, err := stormWrites(ctx, tr, r, cfg.StormWrites, cfg.StormFor)
		end := time.Now()
		if err != nil {
			return nil, err
		}
		run := StormRun{Writes: cfg.StormWrites, NewFiles: newFiles, TookMS: ms(end.Sub(start))}
		run.Bound = int((end.Sub(start) + cfg.StormMaxWait - 1) / cfg.StormMaxWait)

		b.logf("storm: waiting for the final autosave")
		if _, _, err := d.waitFor(ctx, "the final autosave", cfg.StormQuiet+cfg.StormMaxWait+5*time.Minute, 10*time.Millisecond,
			func(w api.WorkspaceStatus) bool { return !w.LastTime.Before(end) && w.Pending == 0 }); err != nil {
			return nil, err
		}
		if err := st.Reload(ctx); err != nil {
			return nil, err
		}
		var final ckpt.Record
		for _, rec := range st.Records() {
			if rec.Kind != ckpt.KindAutosave || rec.SHA == "" || rec.Time.Before(start) {
				continue
			}
			if rec.State == ckpt.StatePartial {
				run.Partial++
			}
			if rec.Time.Before(end) {
				run.AutosavesDuring++
				run.AutosaveMS = append(run.AutosaveMS, float64(rec.DurationMS))
			}
			final = rec
		}
		if final.SHA == "" || final.Time.Before(end) {
			return nil, fmt.Errorf("storm %d: no autosave after the storm in the ledger", r+1)
		}
		finalDur := time.Duration(final.DurationMS) * time.Millisecond
		run.FinalAfterMS, run.FinalSealMS = ms(final.Time.Add(finalDur).Sub(end)), ms(finalDur)
		if run.Tree, err = compareTree(ctx, gitDir, final.SHA, root); err != nil {
			return nil, err
		}
		res.AllEqual = res.AllEqual && run.Tree.Equal
		res.Bound = max(res.Bound, run.Bound)
		res.Runs = append(res.Runs, run)
		autosaves, finals = append(autosaves, float64(run.AutosavesDuring)), append(finals, run.FinalAfterMS)
	}
	res.Autosaves, res.FinalMS = median(autosaves), median(finals)
	if m, err := readMemory(d.pid()); err == nil {
		res.RSSMiB, res.HWMMiB = mib(m.rss), mib(m.hwm)
	}
	return res, d.stop()
}

// stormWrites makes writes file writes spread evenly over `over`: nine in
// ten rewrite an existing file in place (random, so many are hit several
// times), one in ten creates a file, a hundred to a new folder. It returns
// the files created.
func stormWrites(ctx context.Context, tr *tree, run, writes int, over time.Duration) (int, error) {
	r := rand.New(rand.NewPCG(4, uint64(run)))
	created := 0
	start := time.Now()
	for i := range writes {
		if due := start.Add(over * time.Duration(i) / time.Duration(writes)); time.Until(due) > time.Millisecond {
			time.Sleep(time.Until(due))
		}
		if i%1000 == 0 && ctx.Err() != nil {
			return created, ctx.Err()
		}
		var p string
		if i%10 == 0 {
			k := i / 10
			p = fmt.Sprintf("storm%d/d%03d/f%05d.txt", run, k/100, k)
			if k%100 == 0 {
				if err := os.MkdirAll(filepath.Dir(tr.abs(p)), 0o755); err != nil {
					return created, err
				}
			}
			created++
		} else {
			p = tr.files[r.IntN(len(tr.files))]
		}
		body := fmt.Appendf(nil, "storm %d, write %d\n", run, i)
		body = append(body, text(r, 64+r.IntN(192))...)
		if err := overwrite(tr.abs(p), body); err != nil {
			return created, err
		}
	}
	return created, nil
}

// overwrite writes body over the file at p (creating it), in place: opening
// with O_TRUNC would cost about 0.3 ms a write on ext4, which starts writeback
// at the close of a file truncated to zero (auto_da_alloc), too slow for one
// writer to keep up a storm's pace.
func overwrite(p string, body []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(body, 0)
	if err == nil {
		err = f.Truncate(int64(len(body)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
