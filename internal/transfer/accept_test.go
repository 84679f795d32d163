package transfer

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/transport"
)

// flakyListener fails its first fails Accepts with err.
type flakyListener struct {
	net.Listener
	err   error
	fails atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, l.err
	}
	return l.Listener.Accept()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// The mux listener outlives temporary accept errors (fd exhaustion) and
// says so; a permanent error ends it.
func TestAcceptSurvivesTemporaryErrors(t *testing.T) {
	emfile := &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	for _, c := range []struct {
		name  string
		err   error
		fails int32
		serve bool   // a connection still gets through
		log   string // expected in the log
	}{
		{name: "out of file descriptors", err: emfile, fails: 8, serve: true, log: "accept failed; retrying"},
		{name: "system out of fds", err: &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ENFILE)}, fails: 2, serve: true, log: "accepting connections again"},
		{name: "connection aborted", err: &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}, fails: 1, serve: true},
		{name: "a permanent error ends it", err: errors.New("listener broken"), fails: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			fl := &flakyListener{Listener: lis, err: c.err}
			fl.fails.Store(c.fails)
			var logs lockedBuffer
			srv := NewServer(blocks.NewMemStore(), ServerOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			ml := srv.Listener(fl, transport.TCP{}, testCreds.ServerTLS())
			defer ml.Close()
			if c.serve {
				conn, err := net.Dial("tcp", lis.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if _, err := conn.Write([]byte("PRI * HT")); err != nil { // not the bulk magic: a gRPC connection
					t.Fatal(err)
				}
			}
			type accepted struct {
				c   net.Conn
				err error
			}
			got := make(chan accepted, 1)
			go func() {
				c, err := ml.Accept()
				got <- accepted{c, err}
			}()
			select {
			case a := <-got:
				if c.serve && a.err != nil {
					t.Fatalf("Accept: %v, want a connection", a.err)
				}
				if !c.serve && (a.err == nil || !strings.Contains(a.err.Error(), "listener broken")) {
					t.Fatalf("Accept: %v, want the permanent error", a.err)
				}
				if a.c != nil {
					a.c.Close()
				}
			case <-time.After(10 * time.Second): // a bound on a failing test
				t.Fatal("Accept did not return")
			}
			if !strings.Contains(logs.String(), c.log) {
				t.Errorf("log does not say %q:\n%s", c.log, logs.String())
			}
		})
	}
}
