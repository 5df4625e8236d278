package config

import "testing"

func TestMetricsConfig(t *testing.T) {
	for _, tc := range []struct {
		src  string
		line int // 0: accepted
	}{
		{"metrics_listen = \"127.0.0.1:9465\"\n", 0},
		{"metrics_listen = \"[::1]:9465\"\n", 0},
		{"metrics_listen = \"localhost:0\"\nper_workspace_metrics = true\n", 0},
		{"log_level = \"info\"\nmetrics_listen = \"0.0.0.0:9465\"\n", 2},
		{"metrics_listen = \":9465\"\n", 1},
		{"metrics_listen = \"192.0.2.7:9465\"\n", 1},
		{"metrics_listen = \"metrics.example:9465\"\n", 1},
		{"metrics_listen = \"127.0.0.1\"\n", 1},
		{"metrics_listen = \"127.0.0.1:http\"\n", 1},
		{"metrics_allow_remote = true\nmetrics_listen = \"0.0.0.0:9465\"\n", 0},
		{"metrics_listen = \"192.0.2.7:9465\"\nmetrics_allow_remote = true\n", 0},
	} {
		t.Run(tc.src, func(t *testing.T) {
			if tc.line > 0 {
				wantConfigError(t, tc.src, tc.line, "metrics_listen")
				return
			}
			c, err := Parse("cairn.toml", tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if c.MetricsListen == "" {
				t.Errorf("metrics_listen not read: %+v", c)
			}
		})
	}
	c, err := Parse("cairn.toml", "per_workspace_metrics = true\n")
	if err != nil || !c.PerWorkspaceMetrics || c.MetricsListen != "" {
		t.Errorf("per_workspace_metrics: %+v %v", c, err)
	}
}

func TestMetricsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:9465": true, "localhost:9465": true, "LOCALHOST": true, "[::1]:9465": true, "127.8.9.10": true,
		"rebound.example:9465": false, "192.0.2.7:9465": false, "": false, "[::]:9465": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
