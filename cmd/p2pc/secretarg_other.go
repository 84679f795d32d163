//go:build !unix

package main

import "errors"

// reexecWithout cannot replace the process here.
func reexecWithout([]string, string) error {
	return errors.New("this system cannot re-execute a process in place")
}
