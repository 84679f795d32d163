//go:build linux

package digest

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// Identity names the version of a file that fi describes: device, inode,
// size, modification and change time. A file written again (in place or
// replaced) gets another identity, so a digest may be remembered per
// identity. changed is the later of the modification and change times
// (see StableAfter). Outside Linux the identity is "" (unknown: hash again).
func Identity(fi os.FileInfo) (id string, changed time.Time) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", time.Time{}
	}
	m, c := time.Unix(st.Mtim.Sec, st.Mtim.Nsec), time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	if c.After(m) {
		m = c
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d:%d.%d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec), m
}
