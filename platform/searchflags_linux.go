package platform

import "golang.org/x/sys/unix"

// searchFlags open a folder to describe it and look up names in it: O_PATH
// needs only search permission on it.
const searchFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
