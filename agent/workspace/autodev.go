package workspace

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cairn-dev/cairn/agent/config"

	"github.com/cairn-dev/cairn/agent/api"
	"github.com/cairn-dev/cairn/agent/autodev"
	"github.com/cairn-dev/cairn/agent/hankweave"
	"github.com/cairn-dev/cairn/restore/ckpt"
	"github.com/cairn-dev/cairn/snapshot"
	"github.com/cairn-dev/cairn/watcher"
)

// The workspace side of the autodev layout (README.md, "AutoDev's
// in-repository mode"): no shadow store; checkpoints are commits in the
// user's repository (agent/autodev), made on request, for the runtime's
// completed codons, and as a baseline when watching begins on a dirty tree.
// Autosaves are off in this layout: every commit lands on the user's branch.

// autodevPoll is how often an autodev workspace looks again at a repository
// that is not one yet, or is busy (a merge, a rebase …), and at its folder.
var autodevPoll = 2 * time.Second

// openAutodev opens the repository side of an autodev workspace: cairn's
// own index lives under the state directory, private to the owner.
func (w *Workspace) openAutodev(ctx context.Context) error {
	repo, err := autodev.Open(ctx, w.dir, filepath.Join(w.stateDir, "autodev", snapshot.PlainStoreName(w.dir)))
	if err != nil {
		return err
	}
	// Markers that ended before the first checkpoint predate cairn; later
	// ones missing from the list (made while no daemon ran) are made now.
	since := time.Now()
	if l, err := repo.List(ctx); err == nil && len(l.Entries) > 0 {
		since = l.Entries[len(l.Entries)-1].Time
	}
	w.adRepo.Store(repo)
	w.lay = &autodevLayout{w: w, repo: repo, since: since, baselineDue: true}
	w.setStatus(func(s *api.WorkspaceStatus) { s.Layout, s.WorkTree, s.Error = config.LayoutAutodev, w.dir, "" })
	return nil
}

// serveAutodev is serve for the autodev layout: requests, the runtime's
// markers, and a poll for the repository's state and the folder.
func (w *Workspace) serveAutodev(ctx context.Context) error {
	l := w.lay.(*autodevLayout)
	root, skip := l.watch()
	wt, err := watcher.Start(ctx, watcher.Options{Root: root, Skip: skip, MaxWatches: testMaxWatches()})
	if err != nil {
		return fmt.Errorf("watch %s: %w", root, err)
	}
	w.setStatus(func(*api.WorkspaceStatus) { w.wt = wt })
	defer func() {
		w.setStatus(func(*api.WorkspaceStatus) { w.wt = nil })
		wt.Close()
	}()
	w.gone = false
	poll := time.NewTicker(autodevPoll)
	defer poll.Stop()
	l.refresh(ctx)
	l.lifecycle(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case c, open := <-wt.Changes():
			if !open {
				return nil
			}
			if _, k := l.take(c); k == changeControl {
				l.lifecycle(ctx)
			}
		case <-wt.Overflow():
			l.lifecycle(ctx)
		case job := <-w.jobs:
			rec, err := l.checkpoint(ctx, job.req)
			job.reply <- sealResult{rec, err}
		case job := <-w.restores:
			job.run(ctx, nil)
		case <-poll.C:
			if w.gone {
				if !folderMissing(w.dir) {
					return errFolderBack
				}
				continue
			}
			if w.checkGone() {
				continue
			}
			l.refresh(ctx)
			if l.lifecycleDue {
				l.lifecycle(ctx)
			}
		}
	}
}

// note shows why checkpoints are off or paused (status and, once, the log).
func (l *autodevLayout) note(msg string) {
	if msg != "" && msg != l.noted {
		l.w.log.Warn().Msg(msg)
	}
	l.noted = msg
	l.w.setStatus(func(s *api.WorkspaceStatus) {
		s.State, s.Notice = StateWatching, msg
		if msg == "" || s.Error == msg {
			s.Error = ""
		}
	})
}

// refuse shows that git will not run in the repository (as root, in one
// someone else can change): an error in status, logged once, until the
// repository is fixed and the next poll clears it.
func (l *autodevLayout) refuse(msg string) {
	if msg != l.noted {
		l.w.log.Error().Msg(msg)
	}
	l.noted = msg
	l.w.setStatus(func(s *api.WorkspaceStatus) { s.State, s.Error, s.Notice = StateFailed, msg, "" })
}

// refresh reads the repository's state, and makes the baseline once it can.
func (l *autodevLayout) refresh(ctx context.Context) {
	err := l.repo.Check(ctx)
	var blocked *autodev.BlockedError
	var untrusted *autodev.UntrustedError
	switch {
	case errors.Is(err, autodev.ErrNotRepo):
		l.note(autodev.MsgNotRepo)
		return
	case errors.As(err, &blocked):
		l.note(blocked.Error())
		return
	case errors.As(err, &untrusted):
		l.refuse(untrusted.Error())
		return
	case err != nil:
		l.note("")
		l.w.log.Error().Err(err).Msg("repository unusable")
		l.w.setStatus(func(s *api.WorkspaceStatus) { s.State, s.Error = StateFailed, err.Error() })
		return
	}
	if l.baselineDue {
		cctx, cancel := uninterrupted(ctx)
		defer cancel()
		e, made, err := l.repo.Checkpoint(cctx, autodev.Request{Kind: autodev.KindBaseline, Label: autodev.BaselineLabel})
		switch {
		case err != nil:
			l.failed(autodev.KindBaseline, err)
		case made:
			l.baselineDue = false
			l.sealed(e)
		default:
			l.baselineDue = false
			l.w.log.Info().Msg("the tree is clean: no baseline")
		}
	}
	if list, err := l.repo.List(ctx); err == nil {
		l.w.setStatus(func(s *api.WorkspaceStatus) { s.Kept = len(list.Entries) })
	}
	l.note("") // after the baseline: watching means its decision is made
}

// uninterrupted is the context of one change to the repository: shutdown
// does not cut it short (a branch moved but an index not yet following it
// would show the checkpoint as staged reversals), a bound does.
func uninterrupted(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
}

// checkpoint makes a task checkpoint asked for over the socket.
func (l *autodevLayout) checkpoint(ctx context.Context, req snapshot.SealRequest) (ckpt.Record, error) {
	if l.w.checkGone() {
		return ckpt.Record{}, errWorkspaceGone
	}
	label := req.Label
	if label == "" {
		label = req.CodonName
	}
	cctx, cancel := uninterrupted(ctx)
	defer cancel()
	e, _, err := l.repo.Checkpoint(cctx, autodev.Request{Kind: autodev.KindTask, Label: label, Task: req.CodonID})
	if err != nil && e.ID == "" {
		l.failed(autodev.KindTask, err)
		return ckpt.Record{}, err
	}
	l.sealed(e)
	return e.Record(), err
}

// lifecycle makes a task checkpoint for each codon the runtime completed
// since watching began (markers exist only where a runtime writes
// .hankweave/state.json); a failure is tried again at the next poll.
func (l *autodevLayout) lifecycle(ctx context.Context) {
	l.lifecycleDue = false
	st, err := hankweave.ReadState(l.w.dir)
	if err != nil {
		return
	}
	for _, m := range hankweave.Due(st) {
		if ctx.Err() != nil {
			return // shutting down: the next start makes what is missing
		}
		if m.Kind != hankweave.KindCompleted || m.EndTime.IsZero() || m.EndTime.Before(l.since) {
			continue
		}
		cctx, cancel := uninterrupted(ctx)
		e, made, err := l.repo.Checkpoint(cctx, autodev.Request{Kind: autodev.KindTask, Label: m.CodonName, Task: m.CodonID, Marker: m.Key()})
		cancel()
		if err != nil {
			l.failed(autodev.KindTask, err)
			l.lifecycleDue = true
			return
		}
		if made {
			l.sealed(e)
		}
	}
}

func (l *autodevLayout) sealed(e autodev.Entry) {
	rec := e.Record()
	l.w.met.Sealed(rec.Kind, rec, nil, 0)
	l.w.log.Info().Str("id", e.ID).Str("sha", e.Commit).Str("kind", e.Kind).Str("label", e.Label).Msg("checkpoint committed")
	if l.w.emit != nil {
		l.w.emit(api.Event{Type: api.EvCheckpointSealed, Workspace: l.w.dir, Time: time.Now(), Data: rec})
	}
	l.w.setStatus(func(s *api.WorkspaceStatus) {
		s.Seals++
		s.Last, s.LastState, s.LastTime = e.ID, string(ckpt.StateOK), e.Time
	})
}

func (l *autodevLayout) failed(kind string, err error) {
	var blocked *autodev.BlockedError
	if errors.Is(err, autodev.ErrNotRepo) || errors.As(err, &blocked) {
		l.w.log.Warn().Str("kind", kind).Err(err).Msg("no checkpoint")
		return
	}
	var untrusted *autodev.UntrustedError
	if errors.As(err, &untrusted) {
		l.refuse(untrusted.Error()) // a request is answered with it too
		return
	}
	l.w.log.Error().Str("kind", kind).Err(err).Msg("checkpoint failed")
	l.w.publishError("SEAL_FAILED", err.Error())
	l.w.setStatus(func(s *api.WorkspaceStatus) { s.Failures++ })
}

// Autodev is the repository of an autodev workspace, or nil.
func (w *Workspace) Autodev() *autodev.Repo { return w.adRepo.Load() }
