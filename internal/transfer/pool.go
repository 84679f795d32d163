package transfer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"

	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/internal/transfer/transferpb"
	"github.com/p2pc/p2pc/internal/transport"
)

// ErrPoolClosed is returned by a Pool after Close.
var ErrPoolClosed = errors.New("transfer: connection pool closed")

// Pool keeps one gRPC client connection per peer target (an address of
// package transport: "host:port" or "scheme://..."), created on first use
// and shared by every caller; targets are keyed in canonical form.
// Connections reconnect by themselves; Drop forgets a peer that left.
// Safe for concurrent use.
type Pool struct {
	dial []grpc.DialOption
	tls  *tls.Config // for bulk connections
	reg  *transport.Registry

	mu     sync.Mutex // taken before a bulkPeer's (Drop, Close)
	conns  map[string]*grpc.ClientConn
	bulk   map[string]*bulkPeer
	closed bool
}

// NewPool returns an empty pool that dials with the transports of reg
// (nil: transport.Default()). Its connections use DialOptions(clientTLS)
// followed by extra; its bulk connections the same TLS configuration.
func NewPool(reg *transport.Registry, clientTLS *tls.Config, extra ...grpc.DialOption) *Pool {
	if reg == nil {
		reg = transport.Default()
	}
	return &Pool{dial: append(DialOptions(clientTLS), extra...), tls: clientTLS, reg: reg, conns: make(map[string]*grpc.ClientConn), bulk: make(map[string]*bulkPeer)}
}

// Conn returns the connection to target, creating it if needed. Creating
// a connection does no I/O: errors show up on the first call, but for a
// target whose scheme no transport serves.
func (p *Pool) Conn(target string) (*grpc.ClientConn, error) {
	target = transport.Canonical(target)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrPoolClosed
	}
	if c, ok := p.conns[target]; ok {
		return c, nil
	}
	t, addr, err := p.reg.Lookup(target)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	// gRPC resolves nothing ("passthrough"): the transport dials.
	c, err := grpc.NewClient("passthrough:///"+target, slices.Concat(p.dial, []grpc.DialOption{
		grpc.WithAuthority(addr),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return t.Dial(ctx, addr) }),
	})...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", target, err)
	}
	p.conns[target] = c
	return c, nil
}

// Blocks returns a Blocks client for target.
func (p *Pool) Blocks(target string) (transferpb.BlocksClient, error) {
	c, err := p.Conn(target)
	if err != nil {
		return nil, err
	}
	return transferpb.NewBlocksClient(c), nil
}

// bulkPeer returns the bulk path state for target (see bulk.go), or nil
// once the pool is closed or when target's transport lacks the
// transport.Bulk capability.
func (p *Pool) bulkPeer(target string) *bulkPeer {
	target = transport.Canonical(target)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	b, ok := p.bulk[target]
	if !ok {
		t, addr, err := p.reg.Lookup(target)
		if err != nil {
			return nil
		}
		bt, ok := t.(transport.Bulk)
		if !ok {
			return nil
		}
		b = &bulkPeer{target: target, addr: addr, via: bt, tls: p.tls}
		p.bulk[target] = b
	}
	return b
}

// Drop closes and forgets the connections to target, if any.
func (p *Pool) Drop(target string) error {
	target = transport.Canonical(target)
	p.mu.Lock()
	c, ok := p.conns[target]
	delete(p.conns, target)
	if b := p.bulk[target]; b != nil {
		b.close()
		delete(p.bulk, target)
	}
	p.mu.Unlock()
	if !ok {
		return nil
	}
	if err := c.Close(); err != nil {
		return fmt.Errorf("close connection to %s: %w", target, err)
	}
	return nil
}

// Close closes every connection. The pool cannot be used afterwards.
func (p *Pool) Close() error {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	for _, b := range p.bulk {
		b.close()
	}
	p.bulk = nil
	p.closed = true
	p.mu.Unlock()
	var errs []error
	for t, c := range conns {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close connection to %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}
