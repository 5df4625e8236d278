//go:build !unix

package platform

// UntrustedError names a path that someone other than the user git would run
// as can change (gittrust_unix.go).
type UntrustedError struct{ Path, Why, Who, Fix string }

func (e *UntrustedError) Error() string { return e.Path + " " + e.Why }

// CheckGitTrusted is not supported here: no root daemon runs on such a system.
func CheckGitTrusted(uid uint32, gitDir, workTree string) error { return nil }

// CheckTrustedFolder is not supported here (gittrust_unix.go).
func CheckTrustedFolder(uid uint32, dir string) error { return nil }
