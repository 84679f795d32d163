package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/p2pc/p2pc/internal/dirlock"
)

// folderHeld says whether a run holds the output folder's lock, from
// /proc/locks without touching the lock (taking it, even for an instant,
// could turn a run that starts at that moment away); known is false where
// that cannot be told.
func folderHeld(out string) (held, known bool) {
	fi, err := os.Stat(filepath.Join(out, dirlock.FileName))
	if err != nil {
		return false, errors.Is(err, fs.ErrNotExist)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false, false
	}
	dev := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false, false
	}
	// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF": dev as major:minor in hex.
	for _, line := range strings.Split(string(locks), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "FLOCK" && f[5] == dev {
			return true, true
		}
	}
	return false, true
}
