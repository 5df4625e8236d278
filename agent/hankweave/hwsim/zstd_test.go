package hwsim

import (
	"bytes"
	"os/exec"
	"testing"
)

func TestZstdFrames(t *testing.T) {
	path, err := exec.LookPath("zstd")
	for _, n := range []int{0, 1, zstdMaxBlock - 1, zstdMaxBlock, zstdMaxBlock + 1, 3*zstdMaxBlock + 17} {
		data := bytes.Repeat([]byte("abcdefghij\n"), n/11+1)[:n]
		z := zstdRaw(data)
		if got, err := unzstdRaw(z); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("n=%d: %v", n, err)
		}
		if err == nil {
			cmd := exec.Command(path, "-d", "-c")
			cmd.Stdin = bytes.NewReader(z)
			out, err := cmd.Output()
			if err != nil || !bytes.Equal(out, data) {
				t.Fatalf("n=%d: zstd -d: %v", n, err)
			}
		}
	}
	if _, err := unzstdRaw([]byte("not zstd at all")); err == nil {
		t.Fatal("garbage accepted")
	}
}
