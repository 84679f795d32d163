package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// dialInNetns opens up to n TCP connections to addr from network
// namespace ns: the sockets are made on an OS thread moved into ns (a
// socket stays in the namespace it was made in), which moves back before
// it is released. Connects run 64 at a time; those not done when ctx ends
// are dropped.
func dialInNetns(ctx context.Context, ns, addr string, n int) ([]net.Conn, error) {
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, 64)
	errc := make(chan error, 1)
	for range n {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := dialIn(ctx, ns, addr)
			if err != nil {
				select {
				case errc <- err:
				default:
				}
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(conns) == 0 {
		select {
		case err := <-errc:
			return nil, fmt.Errorf("dial %s from %s: %w", addr, ns, err)
		default:
			return nil, fmt.Errorf("dial %s from %s: %w", addr, ns, ctx.Err())
		}
	}
	return conns, nil
}

func dialIn(ctx context.Context, ns, addr string) (net.Conn, error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	target, err := os.Open(filepath.Join("/run/netns", ns))
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("setns: %w", err)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays in the lab's namespace: let it die with
		// this goroutine rather than serve others.
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	return c, err
}
