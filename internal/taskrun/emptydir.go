package taskrun

import (
	"errors"
	"io"
	"os"
)

// EmptyDir reports whether dir is an existing, empty folder: whether a
// slot's work folder can serve the next task as it is (one directory
// read, not a remove and a mkdir per task).
func EmptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}
