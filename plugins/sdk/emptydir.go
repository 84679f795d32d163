//go:build !linux

package sdk

import (
	"errors"
	"io"
	"os"
)

// emptyDir reports whether dir is an existing, empty folder (one
// directory read).
func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}
