package ckpt

import (
	"reflect"
	"testing"
)

func TestGroupFiles(t *testing.T) {
	files := []FileChange{
		{Path: "src/a.go", Status: FileAdded},
		{Path: "src/b/c.go", Status: FileChanged},
		{Path: "src/b/d.go", Status: FileRemoved},
		{Path: "docs/x.md", Status: FileAdded},
		{Path: "README.md", Status: FileChanged},
	}
	got := GroupFiles(files, "")
	want := []FolderCount{
		{Path: "src", Folder: true, Files: 3, Added: 1, Changed: 1, Removed: 1},
		{Path: "README.md", Files: 1, Changed: 1},
		{Path: "docs", Folder: true, Files: 1, Added: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("top: %+v\nwant %+v", got, want)
	}
	got = GroupFiles(files, "src/")
	want = []FolderCount{
		{Path: "src/b", Folder: true, Files: 2, Changed: 1, Removed: 1},
		{Path: "src/a.go", Files: 1, Added: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("under src: %+v\nwant %+v", got, want)
	}
	plan := GroupPlan([]PlanFile{{Path: "a/x", Size: 10, Action: ActionAdd}, {Path: "a/y", Size: 5, Action: ActionModify}},
		[]PlanFile{{Path: "b", Size: 1, Action: ActionDelete}}, "")
	if len(plan) != 2 || plan[0].Path != "a" || plan[0].Bytes != 15 || plan[0].Added != 1 || plan[0].Changed != 1 || plan[1].Removed != 1 {
		t.Errorf("plan: %+v", plan)
	}
}

func TestPage(t *testing.T) {
	xs := []int{0, 1, 2, 3, 4}
	for _, tc := range []struct {
		off, lim int
		want     []int
	}{{0, 2, []int{0, 1}}, {3, 0, []int{3, 4}}, {4, 5, []int{4}}, {9, 2, []int{}}, {-1, 1, []int{0}}} {
		if got := Page(xs, tc.off, tc.lim); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Page(%d, %d) = %v, want %v", tc.off, tc.lim, got, tc.want)
		}
	}
}

func TestUnder(t *testing.T) {
	files := []FileChange{{Path: "src/a"}, {Path: "srcx/b"}, {Path: "src/d/c"}, {Path: "top"}}
	if got := Under(files, "src"); len(got) != 2 || got[0].Path != "src/a" || got[1].Path != "src/d/c" {
		t.Errorf("Under(src) = %+v", got)
	}
	if got := Under(files, ""); len(got) != 4 {
		t.Errorf("Under(\"\") = %+v", got)
	}
}
