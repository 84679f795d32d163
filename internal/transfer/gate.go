package transfer

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// Caps on connections that have not finished their TLS handshake, on a
// node's listener (gRPC and the bulk path alike): whoever holds many open
// without finishing them, member or not, must not exhaust the node's file
// descriptors or memory. A connection over a cap is closed at once; the
// node logs that it caps at most once per gateLogEvery.
const (
	// MaxHandshakingPerIP connections from one source address may be
	// unfinished at once.
	MaxHandshakingPerIP = 32
	// MaxHandshaking connections may be unfinished at once in total.
	MaxHandshaking = 256
	// HandshakeTimeout: a connection that has not finished its TLS
	// handshake this long after it was accepted is closed (its first bytes
	// included: an idle connection that sends nothing is closed too).
	HandshakeTimeout = 10 * time.Second

	gateLogEvery = 10 * time.Second
)

// gate counts unfinished connections per source and in total.
type gate struct {
	maxPerIP, maxTotal int
	log                *slog.Logger

	mu      sync.Mutex
	total   int
	perIP   map[string]int
	capped  int // connections closed since the last log line
	lastLog time.Time
}

func newGate(log *slog.Logger, maxPerIP, maxTotal int) *gate {
	return &gate{maxPerIP: maxPerIP, maxTotal: maxTotal, log: log, perIP: map[string]int{}}
}

// admit counts c as unfinished and returns it wrapped (its Close or
// handshakeDone release the count), or closes it and returns false if a
// cap is reached.
func (g *gate) admit(c net.Conn) (*gatedConn, bool) {
	ip := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(ip); err == nil {
		ip = h
	}
	g.mu.Lock()
	if g.total >= g.maxTotal || g.perIP[ip] >= g.maxPerIP {
		g.capped++
		now := time.Now()
		if now.Sub(g.lastLog) >= gateLogEvery {
			g.log.Warn("too many connections without a finished TLS handshake; closing new ones",
				"source", ip, "from source", g.perIP[ip], "total", g.total,
				"max per source", g.maxPerIP, "max", g.maxTotal, "closed", g.capped)
			g.lastLog, g.capped = now, 0
		}
		g.mu.Unlock()
		c.Close()
		return nil, false
	}
	g.total++
	g.perIP[ip]++
	g.mu.Unlock()
	return &gatedConn{Conn: c, g: g, ip: ip, deadline: time.Now().Add(HandshakeTimeout)}, true
}

func (g *gate) release(ip string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total--
	if g.perIP[ip]--; g.perIP[ip] <= 0 {
		delete(g.perIP, ip)
	}
}

// gatedConn is a connection counted by a gate until its handshake is done
// or it is closed.
type gatedConn struct {
	net.Conn
	g        *gate
	ip       string
	deadline time.Time // for the first bytes and the handshake
	once     sync.Once
}

func (c *gatedConn) handshakeDone() { c.once.Do(func() { c.g.release(c.ip) }) }

func (c *gatedConn) handshakeDeadline() time.Time { return c.deadline }

func (c *gatedConn) Close() error {
	c.handshakeDone()
	return c.Conn.Close()
}

// handshaking is a connection a gate counts (directly, or under a
// prefixConn).
type handshaking interface {
	handshakeDone()
	handshakeDeadline() time.Time
}
