package platform

import "strings"

// TempPrefix starts the name of the temporary entry Tree.ReplaceFile and
// Tree.ReplaceSymlink make beside the path they replace: TempPrefix, then
// the caller's tag and a dash when it gives one, then a random part. A
// process killed between making the entry and renaming it over the path
// leaves it there; a caller that records its tag beforehand can find and
// remove what it left (IsTempOf).
const TempPrefix = ".cairn-"

// IsTempOf reports whether name is a temporary entry's name made with tag.
func IsTempOf(name, tag string) bool {
	return tag != "" && strings.HasPrefix(name, TempPrefix+tag+"-")
}
