package dirlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// PrivateDir makes the folder dir (mode 0700) if it is missing, and
// checks that it is a real folder (not a link) of uid, closed to others:
// a user's lock folder in a shared place such as /tmp, where anyone can
// make the name first. Without uids (uid < 0) it checks no owner.
func PrivateDir(dir string, uid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("make private folder: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("check private folder: %w", err)
	}
	if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 || (uid >= 0 && !ownedBy(fi, uid)) {
		return fmt.Errorf("%s is not a folder of uid %d closed to others (%v)", dir, uid, fi.Mode())
	}
	return nil
}
