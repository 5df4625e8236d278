package service

import (
	"fmt"
	"net"
	"os"
)

// NotifyReady tells systemd the daemon is ready (Type=notify): READY=1 sent as
// one datagram to $NOTIFY_SOCKET. Without that variable (not under systemd) it
// does nothing.
func NotifyReady() error { return notify("READY=1") }

// NotifyStopping tells systemd the daemon is shutting down.
func NotifyStopping() error { return notify("STOPPING=1") }

func notify(state string) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	if path[0] == '@' { // abstract namespace
		path = "\x00" + path[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify systemd on %s: %w", os.Getenv("NOTIFY_SOCKET"), err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify systemd on %s: %w", os.Getenv("NOTIFY_SOCKET"), err)
	}
	return nil
}
