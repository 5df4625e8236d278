package agent

import (
	"sync"
	"sync/atomic"

	"github.com/cairn-dev/cairn/agent/api"
)

// bus fans events out to subscribers; a subscriber whose buffer is full is
// dropped, never waited for.
type bus struct {
	mu      sync.Mutex
	subs    map[*subscriber]struct{}
	dropped atomic.Int64 // subscribers dropped for being slow (cairn_event_clients_dropped_total)
}

type subscriber struct {
	ch    chan api.Event
	allow func(dir string) bool
	only  string
}

func newBus() *bus { return &bus{subs: map[*subscriber]struct{}{}} }

func (b *bus) subscribe(allow func(string) bool, only string) *subscriber {
	s := &subscriber{ch: make(chan api.Event, 256), allow: allow, only: only}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s
}

func (b *bus) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.ch)
	}
}

func (b *bus) publish(ev api.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if (s.only != "" && s.only != ev.Workspace) || !s.allow(ev.Workspace) {
			continue
		}
		select {
		case s.ch <- ev:
		default: // too slow: dropped
			b.dropped.Add(1)
			delete(b.subs, s)
			close(s.ch)
		}
	}
}
