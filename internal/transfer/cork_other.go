//go:build !linux

package transfer

import "net"

// corker: only Linux corks (cork_linux.go).
func corker(net.Conn) func(on bool) { return nil }
