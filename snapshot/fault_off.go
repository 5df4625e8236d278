//go:build !cairnfault

package snapshot

// faultPoint does nothing in a build without the cairnfault tag; the
// compiler inlines it away.
func faultPoint(string) {}
