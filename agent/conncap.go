package agent

import (
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// capListener reads each connection's peer credentials once, from the
// kernel, and closes at once a connection from a uid (other than root) that
// already holds max: one user cannot starve the others of descriptors.
type capListener struct {
	net.Listener
	max int
	log zerolog.Logger

	mu      sync.Mutex
	open    map[uint32]int
	lastLog time.Time
}

func newCapListener(ln net.Listener, max int, log zerolog.Logger) *capListener {
	return &capListener{Listener: ln, max: max, log: log, open: map[uint32]int{}}
}

// peerConn is a connection with the credentials of its peer.
type peerConn struct {
	net.Conn
	uid   uint32
	known bool
	once  sync.Once
	l     *capListener
}

func (c *peerConn) Close() error {
	c.once.Do(func() {
		if c.l != nil {
			c.l.mu.Lock()
			if c.l.open[c.uid]--; c.l.open[c.uid] <= 0 {
				delete(c.l.open, c.uid)
			}
			c.l.mu.Unlock()
		}
	})
	return c.Conn.Close()
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, known := peerUID(c)
		if !known || uid == 0 {
			return &peerConn{Conn: c, uid: uid, known: known}, nil
		}
		l.mu.Lock()
		if l.open[uid] >= l.max {
			quiet := time.Since(l.lastLog) < 10*time.Second
			if !quiet {
				l.lastLog = time.Now()
			}
			l.mu.Unlock()
			c.Close()
			if !quiet {
				l.log.Warn().Uint32("uid", uid).Int("max", l.max).Msg("connection refused: this user holds the most connections allowed")
			}
			continue
		}
		l.open[uid]++
		l.mu.Unlock()
		return &peerConn{Conn: c, uid: uid, known: true, l: l}, nil
	}
}
