// Package platform holds everything OS-specific cairn needs: default paths,
// file locks, durable writes and filesystem flushes. It imports nothing of cairn.
package platform
