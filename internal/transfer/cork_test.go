package transfer

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
)

// tcpPair returns both ends of a TCP connection on 127.0.0.1, closed
// when the test ends.
func tcpPair(t *testing.T) (dialed, accepted net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dialed, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dialed.Close() })
	if accepted, err = l.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { accepted.Close() })
	return dialed, accepted
}

// TestServeBulkUncorksEachRequest: the server corks its socket while it
// writes the answers to one request and uncorks it once they are all
// written, before it waits for the next request, so that the tail of an
// answer is never held back (a corked socket holds a partial segment for
// up to 200 ms).
func TestServeBulkUncorksEachRequest(t *testing.T) {
	src := blocks.NewMemStore()
	data := randomBytes(3, 70000)
	id := blocks.Sum(data)
	if err := src.Put(t.Context(), id, data); err != nil {
		t.Fatal(err)
	}
	missing := blocks.Sum([]byte("missing"))
	s := NewServer(src, ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	// TCP, not net.Pipe: a pipe's empty write waits for a read.
	client, server := tcpPair(t)
	corks := make(chan bool, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer server.Close()
		s.serveBulk(t.Context(), server, func(on bool) { corks <- on })
	}()
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	var head [len(bulkMagic)]byte
	if _, err := io.ReadFull(client, head[:]); err != nil {
		t.Fatal(err)
	}
	next := func() bool {
		t.Helper()
		select {
		case on := <-corks:
			return on
		case <-time.After(10 * time.Second):
			t.Fatal("no cork call within 10s")
			return false
		}
	}
	for range 2 {
		if _, err := client.Write(bulkReq(id, missing)); err != nil {
			t.Fatal(err)
		}
		// The whole answer, then the uncork, before the next request.
		var hdr [bulkHeader]byte
		for _, want := range []int{len(data), 0} {
			if _, err := io.ReadFull(client, hdr[:]); err != nil {
				t.Fatal(err)
			}
			if n := int(binary.BigEndian.Uint32(hdr[blocks.IDSize+1:])); n != want {
				t.Fatalf("answer of %d bytes, want %d", n, want)
			}
			if _, err := io.CopyN(io.Discard, client, int64(want)); err != nil {
				t.Fatal(err)
			}
		}
		if !next() {
			t.Fatal("the answers were written uncorked")
		}
		if next() {
			t.Fatal("the socket was corked twice in one request")
		}
	}
	client.Close()
	<-done
	if len(corks) != 0 {
		t.Fatalf("%d more cork calls after the last request", len(corks))
	}
}
