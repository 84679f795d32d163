package transfer

import (
	"net"
	"syscall"
	"testing"
)

// TestCorkerSetsTCPCork: corker turns TCP_CORK on and off on a TCP
// connection's socket, and is nil for a connection without one.
func TestCorkerSetsTCPCork(t *testing.T) {
	c, _ := tcpPair(t)
	cork := corker(c)
	if cork == nil {
		t.Fatal("corker(*net.TCPConn) = nil")
	}
	state := func() int {
		raw, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		v := -1
		_ = raw.Control(func(fd uintptr) {
			v, err = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK)
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, on := range []bool{true, false, true, false} {
		cork(on)
		if got := state(); (got != 0) != on {
			t.Fatalf("after cork(%v): TCP_CORK = %d", on, got)
		}
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if corker(a) != nil {
		t.Fatal("corker(net.Pipe) is not nil")
	}
}
