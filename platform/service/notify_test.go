//go:build unix

package service

import (
	"net"
	"path/filepath"
	"testing"
)

func TestNotifyReadySendsReadyToNotifySocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	if err := NotifyReady(); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64)
	n, err := ln.Read(b)
	if err != nil || string(b[:n]) != "READY=1" {
		t.Fatalf("read %q, %v; want READY=1", b[:n], err)
	}
	t.Setenv("NOTIFY_SOCKET", "")
	if err := NotifyReady(); err != nil {
		t.Errorf("without NOTIFY_SOCKET: %v, want nothing done", err)
	}
}
