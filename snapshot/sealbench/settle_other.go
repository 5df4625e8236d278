//go:build !unix

package sealbench

// settle is a no-op where there is no sync(2).
func settle() {}
