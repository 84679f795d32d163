package transfer

import (
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transport"
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

// TestGate: a full gate takes every new connection and closes the oldest
// unfinished one for it: of the same source at the per-source cap, else of
// the source holding the most (the oldest of them on a tie).
func TestGate(t *testing.T) {
	g := newGate(slog.New(slog.DiscardHandler), 2, 4)
	raws := map[string]*addrConn{}
	held := map[string]*gatedConn{}
	admit := func(addr string) {
		raws[addr] = &addrConn{addr: addr}
		held[addr] = g.admit(raws[addr])
	}
	for i, c := range []struct {
		addr   string
		closed []string // closed by this admission
	}{
		{"10.0.0.1:1", nil},
		{"10.0.0.1:2", nil},
		{"10.0.0.1:3", []string{"10.0.0.1:1"}}, // per source: its own oldest
		{"10.0.0.2:1", nil},
		{"10.0.0.9:1", nil},                    // the member
		{"10.0.0.3:1", []string{"10.0.0.1:2"}}, // in total: the largest source's oldest
		{"10.0.0.4:1", []string{"10.0.0.1:3"}}, // every source holds one: the oldest of all...
		{"10.0.0.5:1", []string{"10.0.0.2:1"}}, // ... and the next
		{"[2001:db8::1]:1", []string{"10.0.0.9:1"}},
		{"[2001:db8::2]:1", []string{"10.0.0.3:1"}},
		{"[2001:db8::3]:1", []string{"[2001:db8::1]:1"}}, // one /64 is one source
	} {
		before := map[string]bool{}
		for a, r := range raws {
			before[a] = r.closed
		}
		admit(c.addr)
		var closed []string
		for a, r := range raws {
			if r.closed && !before[a] {
				closed = append(closed, a)
			}
		}
		if len(closed) != len(c.closed) || len(closed) == 1 && closed[0] != c.closed[0] {
			t.Fatalf("step %d: admitting %s closed %v, want %v", i, c.addr, closed, c.closed)
		}
		if g.total > 4 {
			t.Fatalf("step %d: %d unfinished, cap 4", i, g.total)
		}
	}
	// A finished handshake frees its place, once; an evicted connection
	// closed later frees nothing more.
	held["10.0.0.4:1"].handshakeDone()
	held["10.0.0.4:1"].Close()
	held["10.0.0.1:1"].Close()
	if g.total != 3 {
		t.Fatalf("after one finished handshake: %d unfinished, want 3", g.total)
	}
	admit("10.0.0.6:1")
	for a, r := range raws {
		if r.closed && a == "10.0.0.5:1" {
			t.Fatal("a place freed by a finished handshake was taken by closing another connection")
		}
	}
	for _, c := range held {
		c.Close()
	}
	if g.total != 0 || len(g.bySource) != 0 {
		t.Fatalf("after closing everything: total %d, per source %v", g.total, g.bySource)
	}
}

// TestSilentConnectionClosed: a connection that sends nothing is closed
// about FirstBytesTimeout after it was accepted, long before
// HandshakeTimeout.
func TestSilentConnectionClosed(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(blocks.NewMemStore(), ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	ml := srv.Listener(lis, transport.TCP{}, testCreds.ServerTLS())
	defer ml.Close()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(HandshakeTimeout - time.Second))
	_, err = c.Read(make([]byte, 1))
	took := time.Since(start)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a silent connection still open after %v", took)
	}
	if err == nil {
		t.Fatal("a silent connection got bytes")
	}
	if took > 3*FirstBytesTimeout {
		t.Fatalf("a silent connection closed after %v, want about %v", took, FirstBytesTimeout)
	}
	t.Logf("closed after %v (%v)", took.Round(time.Millisecond), err)
}
