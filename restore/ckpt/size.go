package ckpt

import "strconv"

// HumanBytes renders n bytes in binary units, one decimal above a KiB:
// 512 B, 1.5 KiB, 12.0 MiB. The store's sizes, the restore plan and the
// CLI's status, gc and prune lines all print with it.
func HumanBytes(n int64) string {
	if n < 1024 && n > -1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f := float64(n) / 1024
	i := 0
	for (f >= 1024 || f <= -1024) && i < len(units)-1 {
		f /= 1024
		i++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + units[i]
}
