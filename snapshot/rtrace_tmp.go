package snapshot

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"time"
)

// TEMPORARY: restore breakdown, not to be committed.
var rtraceOn = os.Getenv("CAIRN_RTRACE") != ""
var rtraceMu sync.Mutex
var rtraceLast time.Time
var rtraceBuf []string

func rmark(name string) {
	if !rtraceOn {
		return
	}
	rtraceMu.Lock()
	defer rtraceMu.Unlock()
	now := time.Now()
	if name == "BEGIN" {
		rtraceLast = now
		rtraceBuf = rtraceBuf[:0]
		return
	}
	rtraceBuf = append(rtraceBuf, fmt.Sprintf("%s=%.1f", name, float64(now.Sub(rtraceLast).Microseconds())/1000))
	rtraceLast = now
	if name == "END" {
		fmt.Fprintln(os.Stderr, "RTRACE", strings.Join(rtraceBuf, " "))
	}
}

var rprofN int
var rprofF *os.File

func rprofStart(label string, direct bool) {
	if os.Getenv("CAIRN_RPROF") == "" || label != "X" || !direct {
		return
	}
	rprofN++
	f, err := os.Create(fmt.Sprintf("%s.%d", os.Getenv("CAIRN_RPROF"), rprofN))
	if err != nil {
		return
	}
	rprofF = f
	_ = pprof.StartCPUProfile(f)
}

func rprofStop() {
	if rprofF != nil {
		pprof.StopCPUProfile()
		rprofF.Close()
		rprofF = nil
	}
}
