package harness

import (
	"errors"
	"syscall"
)

// mountCPUv1 mounts the cgroup v1 cpu controller at dir (already mounted
// there is fine).
func mountCPUv1(dir string) error {
	if err := syscall.Mount("cgroup", dir, "cgroup", 0, "cpu"); err != nil && !errors.Is(err, syscall.EBUSY) {
		return err
	}
	return nil
}
