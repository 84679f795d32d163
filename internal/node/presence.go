package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/peerpb"
)

// PresenceConfig says how a node finds and keeps its peers.
type PresenceConfig struct {
	// MDNS announces the node (if it takes work) and browses for peers.
	MDNS bool
	// Join are static peers' gRPC addresses; their gossip addresses are
	// asked with Info and joined, retried until they answer.
	Join []string
	// Timing tunes failure detection (zero: discovery.LANTiming).
	Timing discovery.Timing
}

// Presence is the node's place in the swarm: its memberlist membership,
// fed by mDNS and static addresses, with this node's metadata (slots and
// free slots kept current). It implements Members for Swarm.
type Presence struct {
	n   *Node
	mem *discovery.Membership
	md  *discovery.MDNS

	mu      sync.Mutex
	changed chan struct{}

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// StartPresence joins the swarm. Close it before the node stops serving.
func (n *Node) StartPresence(ctx context.Context, pc PresenceConfig) (*Presence, error) {
	host, _, err := net.SplitHostPort(n.addr)
	if err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	bind := "0.0.0.0"
	if lh, _, err := net.SplitHostPort(n.lis.Addr().String()); err == nil && !net.ParseIP(lh).IsUnspecified() {
		bind = lh
	}
	mem, err := discovery.Start(ctx, discovery.Config{
		Name:          n.cfg.Name,
		BindAddr:      bind,
		AdvertiseAddr: host,
		Meta:          n.meta,
		Logger:        n.cfg.Logger,
		Timing:        pc.Timing,
		SecretKey:     n.cfg.Creds.GossipKey(),
	})
	if err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	n.SetGossipAddr(mem.GossipAddr)
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &Presence{n: n, mem: mem, changed: make(chan struct{}), cancel: cancel}
	if pc.MDNS {
		cfg := discovery.MDNSConfig{Logger: n.cfg.Logger}
		if n.cfg.Slots > 0 {
			cfg.Self = &discovery.Announcement{Name: n.cfg.Name, GRPCAddr: n.addr, GossipAddr: mem.GossipAddr(), Version: ProtocolVersion}
		}
		if p.md, err = discovery.NewMDNS(cfg); err != nil {
			cancel()
			mem.Close()
			return nil, fmt.Errorf("presence: %w", err)
		}
		p.goRun(func() {
			if err := mem.JoinFrom(pctx, p.md, 2*time.Second); err != nil {
				n.log.Error("mDNS discovery stopped", "err", err)
			}
		})
	}
	if len(pc.Join) > 0 {
		p.goRun(func() { p.joinStatic(pctx, pc.Join) })
	}
	p.goRun(func() { p.watch(pctx) })
	n.stopHooks = append(n.stopHooks, func() {
		if err := p.Close(); err != nil {
			n.log.Info("leave the swarm", "err", err)
		}
	})
	return p, nil
}

func (p *Presence) goRun(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

func (n *Node) meta() discovery.Meta {
	_, free := n.sched.load()
	return discovery.Meta{
		Name:      n.cfg.Name,
		ID:        n.cfg.Creds.ID().String(),
		GRPCAddr:  n.addr,
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		Version:   n.cfg.Version,
		Proto:     ProtocolVersion,
		Slots:     n.cfg.Slots,
		FreeSlots: max(free, 0),
	}
}

// joinStatic resolves static gRPC addresses to gossip addresses and joins
// them, retrying those that do not answer until all have been joined.
func (p *Presence) joinStatic(ctx context.Context, addrs []string) {
	todo, warned := map[string]bool{}, map[string]bool{}
	for _, a := range addrs {
		todo[a] = true
	}
	for len(todo) > 0 {
		for a := range todo {
			conn, err := p.n.conns.Conn(a)
			if err != nil {
				delete(todo, a)
				continue
			}
			ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
			info, err := peerpb.NewPeerClient(conn).Info(ictx, &peerpb.InfoRequest{Proto: ProtocolVersion})
			cancel()
			if err != nil && !warned[a] {
				// Said once per address: a peer not up yet, or of
				// another swarm (a refused handshake). Retried.
				warned[a] = true
				p.n.log.Warn("cannot reach a --join peer yet; retrying every second", "peer", a, "err", err)
			}
			if err != nil || info.GossipAddr == "" {
				continue
			}
			if _, err := p.mem.Join(ctx, []string{info.GossipAddr}); err != nil {
				if errors.Is(err, discovery.ErrNameTaken) {
					p.n.log.Error("cannot join the swarm", "err", err)
					return
				}
				continue
			}
			delete(todo, a)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// watch turns membership events into change signals and keeps this node's
// free-slot count current in its gossiped metadata.
func (p *Presence) watch(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastFree := -1
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-p.mem.Events():
			if !ok {
				return
			}
			p.signal()
		case <-tick.C:
			if _, free := p.n.sched.load(); free != lastFree {
				lastFree = free
				uctx, cancel := context.WithTimeout(ctx, time.Second)
				if err := p.mem.UpdateMeta(uctx); err != nil && ctx.Err() == nil {
					p.n.log.Debug("update metadata", "err", err)
				}
				cancel()
			}
		}
	}
}

func (p *Presence) signal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.changed)
	p.changed = make(chan struct{})
}

// Changed returns a channel closed at the next membership change.
func (p *Presence) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// Candidates returns the live members as peers that might take work.
func (p *Presence) Candidates() []Candidate {
	var out []Candidate
	for _, m := range p.mem.Members() {
		out = append(out, Candidate{
			Name: m.Name, Addr: m.GRPCAddr, Slots: m.Slots, Compatible: m.Compatible,
			OS: m.OS, Arch: m.Arch,
		})
	}
	return out
}

// Members returns the live members with their metadata.
func (p *Presence) Members() []discovery.Member { return p.mem.Members() }

// Close leaves the swarm gracefully (peers learn at once, without waiting
// for failure detection) and stops discovery. The node calls it when it
// stops serving; calling it more than once is safe.
func (p *Presence) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.close() })
	return p.closeErr
}

func (p *Presence) close() error {
	p.cancel()
	err := p.mem.Leave(2 * time.Second)
	if cerr := p.mem.Close(); err == nil {
		err = cerr
	}
	if p.md != nil {
		p.md.Close()
	}
	p.wg.Wait()
	return err
}
