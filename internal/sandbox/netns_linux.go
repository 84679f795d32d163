//go:build linux

package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// netNS is a private network namespace held open by a file descriptor:
// made once (unshare on a throwaway thread), joined by every confined
// thread that forks a process of the same pool (setns), gone when the
// descriptor is closed and the last process in it has exited.
type netNS struct{ fd int }

// newNetNS makes an empty network namespace (only a loopback interface,
// down) and holds it open.
func newNetNS() (*netNS, error) {
	var fd int
	err := onFreshThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("private network namespace: %w", err)
		}
		var err error
		fd, err = unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("private network namespace: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &netNS{fd: fd}, nil
}

// join moves the calling thread into the namespace.
func (n *netNS) join() error {
	if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("join private network namespace: %w", err)
	}
	return nil
}

func (n *netNS) close() error { return unix.Close(n.fd) }

// onFreshThread runs fn on a new OS thread that ends with it: whatever
// fn changes on its thread (namespaces, identity) is never seen by other
// goroutines.
func onFreshThread(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		lockForever()
		done <- fn()
	}()
	return <-done
}
