package storebench

import (
	"bytes"
	"context"
	"testing"
)

func TestRunTiny(t *testing.T) {
	var out bytes.Buffer
	res, err := Run(context.Background(), Config{Files: 300, Checkpoints: 120, Sample: 40, Dir: t.TempDir()}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if len(res.Samples) != 3 || res.RefsAfter < 100 || res.AfterBudget > res.Budget*11/10 {
		t.Fatalf("unexpected result %+v", res)
	}
}
