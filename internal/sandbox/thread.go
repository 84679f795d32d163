package sandbox

import "runtime"

// lockForever locks the calling goroutine to its OS thread for good: when
// the goroutine returns, the thread ends with it, and whatever was changed
// on it (namespace, Landlock domain) ends too.
func lockForever() { runtime.LockOSThread() }
