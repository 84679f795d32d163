// Package transporttest provides Mem, an in-memory transport for tests
// that exercise the transport seam without a socket.
package transporttest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/test/bufconn"
)

// Scheme is the scheme tests register Mem under.
const Scheme = "mem"

// Mem is an in-memory transport: addresses are names, listened on within
// one Mem value. It lacks the Bulk capability. Safe for concurrent use.
type Mem struct {
	// Dials counts successful dials.
	Dials atomic.Int64

	mu  sync.Mutex
	ls  map[string]*memListener
	seq int
}

// NewMem returns a Mem with nothing listening.
func NewMem() *Mem { return &Mem{ls: map[string]*memListener{}} }

// Listen listens on name; "" picks a fresh one.
func (m *Mem) Listen(_ context.Context, name string) (net.Listener, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if name == "" {
		m.seq++
		name = fmt.Sprintf("l%d", m.seq)
	}
	if _, ok := m.ls[name]; ok {
		return nil, fmt.Errorf("mem %q: address in use", name)
	}
	l := &memListener{Listener: bufconn.Listen(1 << 20), m: m, addr: memAddr(name)}
	m.ls[name] = l
	return l, nil
}

// Dial connects to the listener called name.
func (m *Mem) Dial(ctx context.Context, name string) (net.Conn, error) {
	m.mu.Lock()
	l := m.ls[name]
	m.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("mem %q: connection refused", name)
	}
	c, err := l.DialContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("mem %q: %w", name, err)
	}
	m.Dials.Add(1)
	return &memConn{Conn: c, local: memAddr("client"), remote: l.addr}, nil
}

type memListener struct {
	*bufconn.Listener
	m    *Mem
	addr memAddr
	once sync.Once
}

func (l *memListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &memConn{Conn: c, local: l.addr, remote: memAddr("client")}, nil
}

func (l *memListener) Close() error {
	l.once.Do(func() {
		l.m.mu.Lock()
		delete(l.m.ls, string(l.addr))
		l.m.mu.Unlock()
	})
	return l.Listener.Close()
}

func (l *memListener) Addr() net.Addr { return l.addr }

// memConn reports mem addresses.
type memConn struct {
	net.Conn
	local, remote memAddr
}

func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }

type memAddr string

func (memAddr) Network() string  { return Scheme }
func (a memAddr) String() string { return string(a) }
