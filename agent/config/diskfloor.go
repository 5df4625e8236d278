package config

import (
	"fmt"
	"strconv"
	"strings"
)

// DiskFloor is the free space under which autosaves pause: a percentage of
// the filesystem ("5%") or a size ("1GiB"). Zero: the default, the smaller
// of 5 % and 1 GiB (a big disk is not "almost full" with 1 GiB left; a small
// one is before 1 GiB is left only if that is more than 5 % of it).
type DiskFloor struct {
	Percent float64 `json:"percent,omitempty"`
	Bytes   int64   `json:"bytes,omitempty"`
	Off     bool    `json:"off,omitempty"` // "off": autosaves never pause for space
}

func (f DiskFloor) zero() bool { return f.Percent == 0 && f.Bytes == 0 && !f.Off }

// UnmarshalText reads "5%", "0.5%", "1GiB" or a byte count.
func (f *DiskFloor) UnmarshalText(b []byte) error {
	t := strings.TrimSpace(string(b))
	if t == "" {
		*f = DiskFloor{} // the default (MarshalText writes it so)
		return nil
	}
	if t == "off" {
		*f = DiskFloor{Off: true}
		return nil
	}
	if p, ok := strings.CutSuffix(t, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v <= 0 || v >= 100 {
			return fmt.Errorf("bad disk_floor %q (want e.g. 5%% or 1GiB)", t)
		}
		*f = DiskFloor{Percent: v}
		return nil
	}
	n, err := parseSize(t)
	if err != nil {
		return fmt.Errorf("bad disk_floor %q (want e.g. 5%% or 1GiB)", t)
	}
	*f = DiskFloor{Bytes: n}
	return nil
}

// MarshalText writes f as UnmarshalText reads it ("" for the default).
func (f DiskFloor) MarshalText() ([]byte, error) {
	switch {
	case f.Off:
		return []byte("off"), nil
	case f.Percent > 0:
		return []byte(strconv.FormatFloat(f.Percent, 'f', -1, 64) + "%"), nil
	case f.Bytes > 0:
		return []byte(strconv.FormatInt(f.Bytes, 10)), nil
	}
	return []byte{}, nil
}

// Floor is the floor in bytes on a filesystem of total bytes.
func (f DiskFloor) Floor(total uint64) uint64 {
	switch {
	case f.Off:
		return 0
	case f.Percent > 0:
		return uint64(float64(total) * f.Percent / 100)
	case f.Bytes > 0:
		return uint64(f.Bytes)
	}
	return min(total/20, 1<<30)
}
