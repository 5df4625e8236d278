package ckpt

import (
	"fmt"
	"testing"
)

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 1<<20 - 1: "1024.0 KiB", 1 << 20: "1.0 MiB",
		10 << 20: "10.0 MiB", 5 << 30: "5.0 GiB", 1 << 62: "4.0 EiB", 1<<63 - 1: "8.0 EiB", -2048: "-2.0 KiB",
	} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestHumanBytesMatchesTheStoresFormat: the store's sizes print as they did
// before its formatter and the restore plan's became one, for every size up
// to 8 PiB (2^53 bytes). Above that the store's chose the unit on the exact
// integer and this one on float64(n), which may round up to the next unit
// (2^60-1 bytes: "1.0 EiB", was "1024.0 PiB"); below 0 the store's never
// scaled (no store size is negative).
func TestHumanBytesMatchesTheStoresFormat(t *testing.T) {
	old := func(n int64) string {
		const unit = 1024
		if n < unit {
			return fmt.Sprintf("%d B", n)
		}
		div, exp := int64(unit), 0
		for m := n / unit; m >= unit; m /= unit {
			div *= unit
			exp++
		}
		return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
	}
	check := func(n int64) {
		if got, want := HumanBytes(n), old(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, the store printed %q", n, got, want)
		}
	}
	for e := 0; e <= 53; e++ {
		p := int64(1) << e
		for _, n := range []int64{p - 1, p, p + 1, p + p/2, p*3/2 - 1, p * 1000 / 1024} {
			if n >= 0 && n <= 1<<53 {
				check(n)
			}
		}
	}
	for n := int64(0); n < 1<<22; n += 997 {
		check(n)
	}
}
