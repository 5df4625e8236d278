//go:build unix && !linux

package platform

// searchFlags open a folder to describe it and look up names in it.
const searchFlags = dirFlags
