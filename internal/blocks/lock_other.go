//go:build !unix

package blocks

import "os"

// lockFile is a no-op where flock is unavailable: a store directory must
// then be opened by one process at a time by convention.
func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) error { return nil }
