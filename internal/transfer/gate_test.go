package transfer

import (
	"log/slog"
	"net"
	"testing"
)

type addrConn struct {
	net.Conn
	addr   string
	closed bool
}

func (c *addrConn) RemoteAddr() net.Addr {
	a, _ := net.ResolveTCPAddr("tcp", c.addr)
	return a
}

func (c *addrConn) Close() error { c.closed = true; return nil }

func TestGate(t *testing.T) {
	g := newGate(slog.New(slog.DiscardHandler), 2, 3)
	var held []*gatedConn
	for i, c := range []struct {
		addr  string
		admit bool
	}{
		{"10.0.0.1:1", true},
		{"10.0.0.1:2", true},
		{"10.0.0.1:3", false}, // per source
		{"10.0.0.2:1", true},
		{"10.0.0.3:1", false}, // in total
	} {
		raw := &addrConn{addr: c.addr}
		gc, ok := g.admit(raw)
		if ok != c.admit || raw.closed == c.admit {
			t.Fatalf("step %d: %s admitted %v (closed %v), want %v", i, c.addr, ok, raw.closed, c.admit)
		}
		if ok {
			held = append(held, gc)
		}
	}
	held[0].handshakeDone() // a finished handshake frees its place...
	held[0].Close()         // ... once
	if gc, ok := g.admit(&addrConn{addr: "10.0.0.1:4"}); !ok {
		t.Fatal("a finished handshake did not free a place")
	} else {
		held[0] = gc
	}
	for _, c := range held {
		c.Close()
	}
	if g.total != 0 || len(g.perIP) != 0 {
		t.Fatalf("after closing everything: total %d, per source %v", g.total, g.perIP)
	}
}
