package swarmsim

import (
	"net"
	"time"
)

// slowListener gives every connection it accepts a delay before each
// write: the peer's answers (its TLS flights, its gRPC frames) reach the
// coordinator that much later, as over a link with that round trip.
type slowListener struct {
	net.Listener
	delay time.Duration
}

func (l slowListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return slowConn{Conn: c, delay: l.delay}, nil
}

type slowConn struct {
	net.Conn
	delay time.Duration
}

func (c slowConn) Write(b []byte) (int, error) {
	time.Sleep(c.delay) // the link's latency, not a wait for a condition
	return c.Conn.Write(b)
}
