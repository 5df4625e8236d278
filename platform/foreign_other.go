//go:build !unix

package platform

import "io/fs"

// Accounts is who is in which group; this OS has no /etc/group to read.
type Accounts struct{}

// ReadAccounts reads nothing here.
func ReadAccounts() *Accounts { return &Accounts{} }

// Stale is never true here.
func (a *Accounts) Stale() bool { return false }

// ForeignWhy needs owners and modes this OS does not give: every folder is
// reported, so nothing is trusted by mistake.
func ForeignWhy(fi fs.FileInfo, uid uint32, ancestor bool, a *Accounts) string {
	return "its owner is unknown on this OS"
}

// ForeignWhyOf is ForeignWhy of a folder owned by fuid:fgid with mode.
func ForeignWhyOf(fuid, fgid uint32, mode fs.FileMode, uid uint32, ancestor bool, a *Accounts) string {
	return "its owner is unknown on this OS"
}
