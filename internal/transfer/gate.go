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
// descriptors or memory, nor keep members out. A new connection is always
// taken; when a cap is reached the oldest unfinished connection goes for
// it (of the same source at the per-source cap, else of the source that
// holds the most). A flood therefore evicts itself, and a member's
// handshake, which takes milliseconds, finishes long before it becomes the
// oldest. The node logs that it evicts at most once per gateLogEvery.
const (
	// MaxHandshakingPerIP connections from one source (an IPv4 address,
	// an IPv6 /64) may be unfinished at once.
	MaxHandshakingPerIP = 32
	// MaxHandshaking connections may be unfinished at once in total.
	MaxHandshaking = 256
	// HandshakeTimeout: a connection that has not finished its TLS
	// handshake this long after it was accepted is closed.
	HandshakeTimeout = 10 * time.Second
	// FirstBytesTimeout: a connection that has sent nothing this long
	// after it was accepted is closed (a TLS client sends its hello at
	// once).
	FirstBytesTimeout = time.Second

	gateLogEvery = 10 * time.Second
)

// gate tracks unfinished connections per source, oldest first.
type gate struct {
	maxPerIP, maxTotal int
	log                *slog.Logger

	mu       sync.Mutex // a leaf; taken under muxListener's too
	total    int
	bySource map[string][]*gatedConn // oldest first
	next     uint64                  // the order of the next admitted connection
	evicted  int                     // connections closed since the last log line
	lastLog  time.Time
}

func newGate(log *slog.Logger, maxPerIP, maxTotal int) *gate {
	return &gate{maxPerIP: maxPerIP, maxTotal: maxTotal, log: log, bySource: map[string][]*gatedConn{}}
}

// source is the key a connection from addr is counted under: its IP, or
// the /64 of an IPv6 address (one host's share of addresses).
func source(addr net.Addr) string {
	s := addr.String()
	h, _, err := net.SplitHostPort(s)
	if err != nil {
		return s
	}
	ip := net.ParseIP(h)
	if ip == nil || ip.To4() != nil {
		return h
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// admit counts c as unfinished and returns it wrapped (its Close or
// handshakeDone release the count). If a cap is reached, the oldest
// unfinished connection of the same source (per-source cap) or of the
// source holding the most (total cap) is closed to make room.
func (g *gate) admit(c net.Conn) *gatedConn {
	now := time.Now()
	gc := &gatedConn{Conn: c, g: g, src: source(c.RemoteAddr()),
		deadline: now.Add(HandshakeTimeout), firstBytes: now.Add(FirstBytesTimeout)}
	g.mu.Lock()
	g.next++
	gc.n = g.next
	var victim *gatedConn
	switch {
	case len(g.bySource[gc.src]) >= g.maxPerIP:
		victim = g.bySource[gc.src][0]
	case g.total >= g.maxTotal:
		victim = g.largestOldest()
	}
	if victim != nil {
		g.remove(victim)
		g.evicted++
		if now.Sub(g.lastLog) >= gateLogEvery {
			g.log.Warn("too many connections without a finished TLS handshake; closing the oldest",
				"source", gc.src, "from source", len(g.bySource[gc.src]), "total", g.total,
				"max per source", g.maxPerIP, "max", g.maxTotal, "closed", g.evicted)
			g.lastLog, g.evicted = now, 0
		}
	}
	g.bySource[gc.src] = append(g.bySource[gc.src], gc)
	g.total++
	g.mu.Unlock()
	if victim != nil {
		victim.Conn.Close() // its count is gone already
	}
	return gc
}

// largestOldest is the oldest connection of the source holding the most
// (of those, the one whose oldest is oldest). g.mu is held.
func (g *gate) largestOldest() *gatedConn {
	var best []*gatedConn
	for _, cs := range g.bySource {
		if len(cs) > len(best) || len(cs) == len(best) && len(cs) > 0 && cs[0].n < best[0].n {
			best = cs
		}
	}
	if len(best) == 0 {
		return nil
	}
	return best[0]
}

// remove forgets c if it is still counted. g.mu is held.
func (g *gate) remove(c *gatedConn) bool {
	cs := g.bySource[c.src]
	for i, x := range cs {
		if x == c {
			cs = append(cs[:i:i], cs[i+1:]...)
			if len(cs) == 0 {
				delete(g.bySource, c.src)
			} else {
				g.bySource[c.src] = cs
			}
			g.total--
			return true
		}
	}
	return false
}

func (g *gate) release(c *gatedConn) {
	g.mu.Lock()
	g.remove(c)
	g.mu.Unlock()
}

// gatedConn is a connection counted by a gate until its handshake is done,
// it is closed, or the gate evicts it.
type gatedConn struct {
	net.Conn
	g          *gate
	src        string
	n          uint64    // admitted n-th: lower is older
	deadline   time.Time // for the handshake
	firstBytes time.Time // for the first byte
	once       sync.Once
}

func (c *gatedConn) handshakeDone() { c.once.Do(func() { c.g.release(c) }) }

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
