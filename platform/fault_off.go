//go:build !cairnfault

package platform

// faultPoint does nothing in the shipped binary (fault_on.go).
func faultPoint(string) {}
