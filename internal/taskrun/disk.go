package taskrun

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/p2pc/p2pc/internal/sandbox"
)

// checkDisk turns the result of a task that ran in work into a disk
// limit error when limit > 0 and the task left more than limit bytes in
// work, or failed with its folder full to the limit or with EFBIG ("file
// too large": a write past its file-size limit). Otherwise it returns
// err.
func checkDisk(work string, limit int64, err error) error {
	if limit <= 0 {
		return err
	}
	over := fileTooLarge(err)
	if !over {
		// A failed task that filled its folder up to the limit was
		// stopped by it (SIGXFSZ, or EFBIG reworded by the task).
		n, derr := diskUse(work, limit)
		over = derr == nil && (n > limit || err != nil && n >= limit)
	}
	if !over {
		return err
	}
	le := &sandbox.LimitError{What: "disk", Limit: limit}
	if err == nil {
		return le
	}
	return fmt.Errorf("%w: %w", le, err)
}

// checkDiskClean is checkDisk for a task that left its folder empty:
// only a write past its file-size limit can have hit the limit.
func checkDiskClean(limit int64, err error) error {
	if limit <= 0 || !fileTooLarge(err) {
		return err
	}
	return fmt.Errorf("%w: %w", &sandbox.LimitError{What: "disk", Limit: limit}, err)
}

// fileTooLarge reports whether err says a write or truncate went past
// the file-size limit: EFBIG ("file too large"), or a shell's word for
// SIGXFSZ ("File size limit exceeded").
func fileTooLarge(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "file too large") || strings.Contains(msg, "file size limit exceeded")
}

// diskUse adds up the apparent sizes of the files beneath dir (a sparse
// file counts at its length), stopping once the sum exceeds limit.
func diskUse(dir string, limit int64) (int64, error) {
	var n int64
	errOver := errors.New("over")
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
			if n > limit {
				return errOver
			}
		}
		return nil
	})
	if errors.Is(err, errOver) {
		err = nil
	}
	return n, err
}
