package node

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/gpu"
	"github.com/p2pc/p2pc/internal/transport"
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
	// QuietDeaths: discovery.Config.QuietDeaths (a submitter).
	QuietDeaths bool
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
	failed  map[string]bool // members declared failed, until they come back

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// StartPresence joins the swarm. Close it before the node stops serving.
func (n *Node) StartPresence(ctx context.Context, pc PresenceConfig) (*Presence, error) {
	_, hostPort := transport.Split(n.addr)
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	bind := "0.0.0.0"
	if lh, _, err := net.SplitHostPort(n.lis.Addr().String()); err == nil && !net.ParseIP(lh).IsUnspecified() {
		bind = lh
	}
	mem, err := discovery.Start(ctx, discovery.Config{
		Name:          n.cfg.Name,
		QuietDeaths:   pc.QuietDeaths,
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
	stopGhost, err := n.startGhost(ctx, mem, bind, host)
	if err != nil {
		mem.Close()
		return nil, fmt.Errorf("presence: %w", err)
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &Presence{n: n, mem: mem, changed: make(chan struct{}), failed: map[string]bool{}, cancel: cancel}
	if pc.MDNS {
		cfg := discovery.MDNSConfig{Logger: n.cfg.Logger}
		if n.allSlots() > 0 {
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
		static := &discovery.Resolver{Addrs: pc.Join, Resolve: ResolveStatic(n.conns)}
		p.goRun(func() {
			if err := mem.JoinFrom(pctx, static, time.Second); err != nil {
				n.log.Error("cannot join the swarm", "err", err)
			}
		})
	}
	p.goRun(func() { p.watch(pctx) })
	n.stopHooks = append(n.stopHooks, func() {
		stopGhost()
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
		Slots:     n.allSlots(),
		FreeSlots: max(free, 0),
		Sandbox:   n.confinement,
		GPUs:      gpu.Summary(n.cfg.GPUs.Devices),
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
		case e, ok := <-p.mem.Events():
			if !ok {
				return
			}
			p.note(e)
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

// note keeps the set of members declared failed: a Dead event adds one,
// its Join (it answered again) or Leave removes it.
func (p *Presence) note(e discovery.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e.Kind {
	case discovery.Dead:
		p.failed[e.Member.Name] = true
	case discovery.Join, discovery.Leave:
		delete(p.failed, e.Member.Name)
	}
}

// Failed reports whether the membership declared name failed and has not
// seen it come back.
func (p *Presence) Failed(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed[name]
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
			Name: m.Name, ID: m.ID, Addr: m.GRPCAddr, Slots: m.Slots, Compatible: m.Compatible,
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
