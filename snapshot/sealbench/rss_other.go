//go:build !linux

package sealbench

import "os"

// peakRSS is not measured here.
func peakRSS(*os.ProcessState) int64 { return 0 }

// ownPeakRSS is not measured here.
func ownPeakRSS() int64 { return 0 }
