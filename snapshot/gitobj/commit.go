package gitobj

import (
	"bytes"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Commit is what `git commit-tree` writes: no encoding header, no signature.
type Commit struct {
	Tree      string
	Parents   []string
	Author    string // "Name <email>"
	Committer string
	When      time.Time // author and committer date, written in UTC as commit-tree does for an ISO date ending in Z
	Message   string
}

// Encode is the commit object's content.
func (c Commit) Encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "tree %s\n", c.Tree)
	for _, p := range c.Parents {
		fmt.Fprintf(&b, "parent %s\n", p)
	}
	stamp := fmt.Sprintf("%d +0000", c.When.Unix())
	fmt.Fprintf(&b, "author %s %s\n", c.Author, stamp)
	fmt.Fprintf(&b, "committer %s %s\n", c.Committer, stamp)
	b.WriteByte('\n')
	b.WriteString(c.Message)
	return b.Bytes()
}

// MessageAsIs reports whether git stores msg byte for byte: commit-tree
// rewrites text it does not take for UTF-8 (verify_utf8 in git's commit.c:
// invalid sequences, surrogates, non-characters) and refuses a NUL.
func MessageAsIs(msg string) bool {
	if !utf8.ValidString(msg) || strings.IndexByte(msg, 0) >= 0 {
		return false
	}
	for _, r := range msg {
		if r&0xfffe == 0xfffe || r >= 0xfdd0 && r <= 0xfdef {
			return false
		}
	}
	return true
}

// CommitTree returns the tree a commit object names.
func CommitTree(data []byte) (string, error) {
	line, _, _ := bytes.Cut(data, []byte{'\n'})
	tree, ok := bytes.CutPrefix(line, []byte("tree "))
	if !ok {
		return "", fmt.Errorf("commit: no tree line")
	}
	return string(tree), nil
}
