//go:build !linux

package swarmsim

import "errors"

type memory struct{ rss, hwm int64 }

// procMemory reads a process's memory on Linux only.
func procMemory(int) (memory, error) {
	return memory{}, errors.New("process memory is read on Linux only")
}
