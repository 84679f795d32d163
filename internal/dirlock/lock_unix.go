//go:build unix

package dirlock

import (
	"errors"
	"os"
	"syscall"
)

// haveFlock: locks are real and Sweep may remove folders.
const haveFlock = true

// lockFile takes an exclusive flock on f without waiting. It returns
// errHeld when another open file holds it (in this process or another).
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errHeld
		default:
			return err
		}
	}
}

// ownedBy reports whether fi's file belongs to uid.
func ownedBy(fi os.FileInfo, uid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}
