//go:build unix

package platform

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOpenDirNoFollow(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"real/sub", "other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../other", filepath.Join(root, "real/rel")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want error // nil: opens
	}{
		{"/", nil},
		{root, nil},
		{filepath.Join(root, "real/sub"), nil},
		{filepath.Join(root, "link"), ErrLinkInPath},
		{filepath.Join(root, "link/sub"), ErrLinkInPath},
		{filepath.Join(root, "real/rel"), ErrLinkInPath},
		{filepath.Join(root, "missing/sub"), fs.ErrNotExist},
		{filepath.Join(root, "file"), syscall.ENOTDIR},
	} {
		f, err := OpenDirNoFollow(c.path)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.path, err)
				continue
			}
			if f.Name() != c.path {
				t.Errorf("%s: named %s", c.path, f.Name())
			}
			f.Close()
			continue
		}
		if err == nil {
			f.Close()
			t.Errorf("%s: opened, want %v", c.path, c.want)
		} else if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.path, err, c.want)
		}
	}
	for _, p := range []string{"relative", root + "/", root + "/./real", ""} {
		if f, err := OpenDirNoFollow(p); err == nil {
			f.Close()
			t.Errorf("%q: opened, want an error", p)
		}
	}

	dir, err := OpenDirNoFollow(filepath.Join(root, "real"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	sub, err := OpenDirAt(dir, "sub")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if want := filepath.Join(root, "real/sub"); sub.Name() != want {
		t.Errorf("OpenDirAt named %s, want %s", sub.Name(), want)
	}
	uid, gid, mode, dev, err := DirInfo(sub)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(sub.Name())
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if uid != st.Uid || gid != st.Gid || mode != fi.Mode() || dev != uint64(st.Dev) {
		t.Errorf("DirInfo %d:%d %v dev %d, Lstat %d:%d %v dev %d", uid, gid, mode, dev, st.Uid, st.Gid, fi.Mode(), st.Dev)
	}
	if f, err := OpenDirAt(dir, "rel"); !errors.Is(err, ErrLinkInPath) {
		if err == nil {
			f.Close()
		}
		t.Errorf("OpenDirAt on a link: %v, want ErrLinkInPath", err)
	}
	for _, name := range []string{"", ".", "..", "sub/x"} {
		if f, err := OpenDirAt(dir, name); err == nil {
			f.Close()
			t.Errorf("OpenDirAt %q: opened, want an error", name)
		}
	}
}
