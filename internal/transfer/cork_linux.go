package transfer

import (
	"net"
	"syscall"
)

// corker returns a function that corks (true) and uncorks (false) c's
// socket, or nil where c has none. A corked socket sends only full
// segments: the bulk server corks while it writes an answer, whose 16 KiB
// TLS records then leave as 64 KiB segments on loopback instead of one
// segment each, and uncorks to push the tail.
func corker(c net.Conn) func(on bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func(on bool) {
		v := 0
		if on {
			v = 1
		}
		_ = raw.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, v)
		})
	}
}
