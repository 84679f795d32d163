package transfer

import (
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/p2pc/p2pc/internal/blocks"
)

// writeCounter counts the writes on the connections it accepts.
type writeCounter struct {
	net.Listener
	writes atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, n: &l.writes}, nil
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// TestBulkAnswerBatched: a bulk answer of 1 MiB leaves the server in a
// few writes of many TLS records each (not one write per 16 KiB record),
// arrives whole, and the answer after it (a small one) is not held back.
func TestBulkAnswerBatched(t *testing.T) {
	src := blocks.NewMemStore()
	big := randomBytes(3, 1<<20)
	small := randomBytes(4, 100)
	for _, d := range [][]byte{big, small} {
		if err := src.Put(t.Context(), blocks.Sum(d), d); err != nil {
			t.Fatal(err)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &writeCounter{Listener: lis}
	_, addr := serveOn(t, cl, src, ServerOptions{}, true, false)
	c := rawBulk(t, addr)

	for _, d := range [][]byte{big, small} {
		before := cl.writes.Load()
		id := blocks.Sum(d)
		if _, err := c.Write(bulkReq(id)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, bulkHeader+len(d))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("answer of %d bytes: %v", len(d), err)
		}
		if !bytes.Equal(got[:blocks.IDSize], id[:]) || got[blocks.IDSize] != bulkStatusOK || !bytes.Equal(got[bulkHeader:], d) {
			t.Fatalf("answer of %d bytes differs", len(d))
		}
		// 1 MiB is 66 records (header, 64 x 16 KiB, the rest): one
		// write each unbatched, 5 batched; allow up to 9.
		if n, most := cl.writes.Load()-before, int64(len(d)/(128<<10)+1); n > most {
			t.Errorf("answer of %d bytes took %d writes, want at most %d", len(d), n, most)
		}
	}
}
