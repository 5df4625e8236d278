//go:build !unix

package platform

func deprioritize(int) {}
