//go:build unix

package snapshot

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/restore/ckpt"
)

// BenchmarkInprocSeal times one incremental seal by the in-process engine
// (20 files edited, 5 added, 5 deleted) on trees of 10k and 100k files, for
// profiling (go test -bench InprocSeal -cpuprofile …). The tree and its
// first seal are made once per size and not timed; they take a minute at
// 100k files, which is why only -bench builds them. `cairn bench seal` is
// the benchmark that compares engines.
func BenchmarkInprocSeal(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) { benchInprocSeal(b, n) })
	}
}

func benchInprocSeal(b *testing.B, n int) {
	ctx := context.Background()
	dir := b.TempDir()
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	var files, dirs []string
	for len(files) < n {
		d := fmt.Sprintf("src/m%d/p%d/d%d", len(dirs)%10, len(dirs)/10%50, len(dirs))
		dirs = append(dirs, d)
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 20 && len(files) < n; i++ {
			files = append(files, fmt.Sprintf("%s/f%d.go", d, i))
		}
	}
	content := func() []byte {
		return []byte(strings.Repeat(fmt.Sprintf("line %d\n", rng.Uint64()), 64+rng.IntN(256)))
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), content(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("*.log\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	st, seal := benchSealer(ctx, b, dir)
	seal(nil)
	next := 0
	mutate := func() []string {
		var changed []string
		for range 20 {
			f := files[rng.IntN(len(files))]
			if err := os.WriteFile(filepath.Join(dir, f), content(), 0o644); err != nil {
				b.Fatal(err)
			}
			changed = append(changed, f)
		}
		for range 5 {
			next++
			f := fmt.Sprintf("%s/new%d.go", dirs[rng.IntN(len(dirs))], next)
			if err := os.WriteFile(filepath.Join(dir, f), content(), 0o644); err != nil {
				b.Fatal(err)
			}
			files = append(files, f)
			changed = append(changed, f)
		}
		for range 5 {
			i := rng.IntN(len(files))
			f := files[i]
			files[i] = files[len(files)-1]
			files = files[:len(files)-1]
			if err := os.Remove(filepath.Join(dir, f)); err != nil {
				b.Fatal(err)
			}
			changed = append(changed, f)
		}
		return changed
	}
	seal(mutate()) // the first incremental seal records nothing new to warm
	if st.lastEngine != EngineInproc {
		b.Fatalf("sealed by %s", st.lastEngine)
	}
	for b.Loop() {
		b.StopTimer()
		changed := mutate()
		syscall.Sync() // one seal's writeback must not land in the next one's time
		b.StartTimer()
		seal(changed)
	}
	if st.lastEngine != EngineInproc {
		b.Fatalf("sealed by %s", st.lastEngine)
	}
}

// benchSealer opens an in-process store over dir (closed with the
// benchmark) and returns it with a seal of a manual checkpoint over changed
// (nil: a full reconcile) that must end ok.
func benchSealer(ctx context.Context, b *testing.B, dir string) (*Store, func(changed []string)) {
	st, err := Open(ctx, dir, Options{Layout: LayoutPlain, StateDir: b.TempDir(), Engine: EngineInproc})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st, func(changed []string) {
		rec, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual, Changed: changed})
		if err != nil || rec.State != ckpt.StateOK {
			b.Fatalf("seal: %v (%+v)", err, rec)
		}
	}
}

// BenchmarkInprocReconcile times the daemon's full reconcile (an autosave
// that skips an unchanged tree) by the in-process engine on a 10k-file tree
// where nothing changed since the last checkpoint, for profiling.
// `cairn bench seal` compares it with git status.
func BenchmarkInprocReconcile(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	for i := range 10_000 {
		d := filepath.Join(dir, fmt.Sprintf("src/m%d/d%d", i/2000, i/20))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.go", i)), []byte(strings.Repeat("x", 100+i%500)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	st, err := Open(ctx, dir, Options{Layout: LayoutPlain, StateDir: b.TempDir(), Engine: EngineInproc})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if rec, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindManual}); err != nil || rec.State != ckpt.StateOK {
		b.Fatalf("seal: %v (%+v)", err, rec)
	}
	for b.Loop() {
		rec, err := st.Seal(ctx, SealRequest{Kind: ckpt.KindAutosave, SkipUnchanged: true})
		if err != nil || rec.SHA != "" {
			b.Fatalf("reconcile: %v (%+v)", err, rec)
		}
	}
	if st.lastEngine != EngineInproc {
		b.Fatalf("sealed by %s", st.lastEngine)
	}
}

// BenchmarkInprocSealBesideWriter times a 10k-file tree's incremental seal
// (20 files edited) while another goroutine writes a 300 MB file over and
// over on the same file system, as an agent's build would: flush=written is
// the engine's flush (the files it wrote, fsynced), flush=syncfs the one it
// replaced (SyncAll before each seal: one syncfs of the whole file system,
// which waits for the other writer's data too). It reports the median.
func BenchmarkInprocSealBesideWriter(b *testing.B) {
	for _, mode := range []string{"written", "syncfs"} {
		b.Run("flush="+mode, func(b *testing.B) {
			ctx := context.Background()
			dir := b.TempDir()
			var files []string
			for i := range 10_000 {
				d := fmt.Sprintf("src/d%d", i/20)
				if i%20 == 0 {
					if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
						b.Fatal(err)
					}
				}
				f := fmt.Sprintf("%s/f%d.go", d, i)
				if err := os.WriteFile(filepath.Join(dir, f), []byte(strings.Repeat("x", 200+i%300)), 0o644); err != nil {
					b.Fatal(err)
				}
				files = append(files, f)
			}
			st, seal := benchSealer(ctx, b, dir)
			seal(nil)
			edit := func(round int) []string {
				var changed []string
				for j := range 20 {
					f := files[(round*20+j)%len(files)]
					if err := os.WriteFile(filepath.Join(dir, f), []byte(fmt.Sprintf("round %d\n", round)), 0o644); err != nil {
						b.Fatal(err)
					}
					changed = append(changed, f)
				}
				return changed
			}
			seal(edit(0))
			stop := make(chan struct{})
			done := make(chan struct{})
			big := filepath.Join(b.TempDir(), "big")
			go func() {
				defer close(done)
				buf := make([]byte, 1<<20)
				for {
					f, err := os.Create(big)
					if err != nil {
						return
					}
					for range 300 {
						select {
						case <-stop:
							f.Close()
							return
						default:
						}
						f.Write(buf)
					}
					f.Close()
				}
			}()
			defer func() { close(stop); <-done }()
			var took []float64
			round := 0
			for b.Loop() {
				b.StopTimer()
				round++
				changed := edit(round)
				if mode == "syncfs" && st.inproc.eng != nil {
					st.inproc.eng.db.SyncAll()
				}
				b.StartTimer()
				t0 := time.Now()
				seal(changed)
				took = append(took, float64(time.Since(t0).Microseconds())/1000)
			}
			slices.Sort(took)
			b.ReportMetric(took[len(took)/2], "median-ms")
			if st.lastEngine != EngineInproc {
				b.Fatalf("sealed by %s", st.lastEngine)
			}
		})
	}
}
