package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// LoopbackHost reports whether a host (with or without a port) is a
// loopback IP address or localhost.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckMetricsListen refuses an address that is not host:port, and one that
// is not loopback unless allowRemote: anyone who reaches it reads the metrics.
func CheckMetricsListen(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics_listen %q: want host:port, e.g. 127.0.0.1:9465", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("metrics_listen %q: the port must be a number up to 65535", addr)
	}
	if allowRemote || (host != "" && LoopbackHost(host)) {
		return nil
	}
	return fmt.Errorf("metrics_listen %q is not a loopback address (127.0.0.1, [::1] or localhost); set metrics_allow_remote = true to serve metrics to other hosts", addr)
}
