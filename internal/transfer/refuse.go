package transfer

import (
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"
)

// Refused handshakes: a stranger (no swarm secret, another swarm's) that
// dials a node is refused by TLS. Each remote host is logged once per
// process, at warn level; later refusals only count.
var (
	refusedMu    sync.Mutex
	refusedHosts = map[string]bool{}
	refusedCount atomic.Int64
)

// RefusedHandshakes is how many incoming connections this process refused
// at the TLS handshake (gRPC and bulk).
func RefusedHandshakes() int64 { return refusedCount.Load() }

func noteRefused(log *slog.Logger, addr net.Addr, err error) {
	refusedCount.Add(1)
	host := addr.String()
	if h, _, e := net.SplitHostPort(host); e == nil {
		host = h
	}
	refusedMu.Lock()
	first := !refusedHosts[host]
	refusedHosts[host] = true
	refusedMu.Unlock()
	if first {
		log.Warn("refused a connection: its handshake does not prove membership of this swarm (logged once per address)", "remote", addr.String(), "err", err)
	}
}

func (s *Server) refused(addr net.Addr, err error) { noteRefused(s.log, addr, err) }

// refusingCreds are gRPC server credentials that log refused handshakes.
type refusingCreds struct {
	credentials.TransportCredentials
	log *slog.Logger
}

// ServerHandshake bounds the handshake by the connection's handshake
// deadline (HandshakeTimeout after it was accepted; gRPC's own default
// is two minutes) and, once it is over, releases the connection from the
// listener's cap on unfinished handshakes.
func (r refusingCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	dl := time.Now().Add(HandshakeTimeout)
	h, gated := c.(handshaking)
	if gated {
		dl = h.handshakeDeadline()
	}
	_ = c.SetDeadline(dl)
	conn, info, err := r.TransportCredentials.ServerHandshake(c)
	if err != nil {
		noteRefused(r.log, c.RemoteAddr(), err)
		return conn, info, err
	}
	_ = c.SetDeadline(time.Time{})
	if gated {
		h.handshakeDone()
	}
	return conn, info, err
}

func (r refusingCreds) Clone() credentials.TransportCredentials {
	return refusingCreds{r.TransportCredentials.Clone(), r.log}
}

func serverCreds(serverTLS *tls.Config, log *slog.Logger) credentials.TransportCredentials {
	if log == nil {
		log = slog.Default()
	}
	return refusingCreds{credentials.NewTLS(serverTLS), log.With("component", "trust")}
}
