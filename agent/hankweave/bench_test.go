package hankweave

import (
	"fmt"
	"strings"
	"testing"
)

// bigState is a state of runs × codons records shaped like the runtime's.
func bigState(runs, codons int) []byte {
	var b strings.Builder
	b.WriteString(`{"runs":[`)
	for r := 0; r < runs; r++ {
		if r > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"runId":"%d-abcde","runFolder":"/x","gitBranch":"run-%d-abcde","startingConditions":{"type":"fresh"},"codons":[`, r, r)
		for c := 0; c < codons; c++ {
			if c > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"codonId":"c%d","startTime":"2025-07-21T15:07:43.686Z","status":"completed","rigSetupCheckpoint":"%040d","claudePid":4,"claudeLogPath":"runs/x/c-claude.log","claudeSessionId":"s","currentCost":0.1,"currentTokens":{"inputTokens":1,"outputTokens":2,"cacheCreationTokens":3,"cacheReadTokens":4},"assistantMessageCount":3,"extensionCount":0,"endTime":"2025-07-21T15:08:01.002Z","exitCode":0,"finalCost":0.1,"finalTokens":{"inputTokens":1,"outputTokens":2,"cacheCreationTokens":3,"cacheReadTokens":4},"resultMessageReceived":true,"completionCheckpoint":""}`, c, c)
		}
		b.WriteString(`],"status":"completed","startTime":"2025-07-21T15:07:43.600Z","serverPid":1}`)
	}
	b.WriteString(`],"currentRunId":null,"executionPlan":[`)
	for c := 0; c < codons; c++ {
		if c > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"codon":{"id":"c%d","name":"C %d","checkpointedFiles":["c%d/**"],"rigSetup":[{"type":"command","command":{"run":"make"}}]},"codonId":"c%d"}`, c, c, c, c)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func BenchmarkParseStateAndDue(b *testing.B) {
	data := bigState(50, 30) // 1,500 records
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		st, err := ParseState(data)
		if err != nil {
			b.Fatal(err)
		}
		if len(Due(st)) != 3000 {
			b.Fatal("markers")
		}
	}
}

func BenchmarkMarshalState(b *testing.B) {
	st, err := ParseState(bigState(50, 30))
	if err != nil {
		b.Fatal(err)
	}
	st.Runs[0].Status = RunFailed
	for b.Loop() {
		if _, err := st.MarshalIndent(); err != nil {
			b.Fatal(err)
		}
	}
}
