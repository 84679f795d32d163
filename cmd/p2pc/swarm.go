package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/dirlock"
	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/node"
	"github.com/p2pc/p2pc/internal/swarmjobs"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/transport"
)

// node.Swarm enrols peers for the coordinator, without importing it.
var _ job.Swarm = (*node.Swarm)(nil)

// submitterSwarm is the node `p2pc run` starts so that peers can take
// part: it serves the job's blocks and enrols peers. It takes no work
// itself (its local slots run tasks directly).
type submitterSwarm struct {
	// name is the submitter's name in its job (report.json's node, its
	// local slots' peer): the hostname, with or without a swarm.
	name   string
	remote *job.RemoteOptions // nil: local only
	// member is its own entry in the membership.
	member string
	// members lists the swarm's members (nil: local only).
	members func() []discovery.Member
	// halt stops the node: it leaves the membership and removes its
	// folder (nil: local only).
	halt func()
	// self is the node as the Jobs protocol names it, and conns its
	// connections (selfrun.go; unset: local only).
	self  swarmjobs.Member
	conns *transfer.Pool

	leaveOnce sync.Once
	stopped   chan struct{} // closed once halt returned
}

// leave starts stopping the node, in the background: it is called once
// the job no longer needs peers and its results and report are on disk
// (job.RunOptions.Ending), so that leaving the membership overlaps the
// rest of the run's end (its plugin processes closed, the summary). It
// may be called more than once.
func (s *submitterSwarm) leave() {
	s.leaveOnce.Do(func() {
		s.stopped = make(chan struct{})
		go func() {
			defer close(s.stopped)
			if s.halt != nil {
				s.halt()
			}
		}()
	})
}

// stop stops the node (leave) and waits until it has.
func (s *submitterSwarm) stop() {
	s.leave()
	<-s.stopped
}

func startSwarm(ctx context.Context, g *Globals, c *RunCmd, tr *phaseTrace) (*submitterSwarm, error) {
	host, _ := os.Hostname()
	// Its entry in the swarm's membership must be unique though: several
	// runs and a `p2pc join` may share the machine.
	member := fmt.Sprintf("%s-run-%d", host, os.Getpid())
	static, err := discovery.ParseAddrs(c.Join)
	if err != nil {
		return nil, withCode(exitBadInput, fmt.Errorf("--join: %w", err))
	}
	if len(static) == 0 && c.NoMDNS {
		return &submitterSwarm{name: host}, nil
	}
	_, ok, err := g.secret()
	if err != nil {
		return nil, err
	}
	if !ok {
		if len(static) > 0 || c.MinPeers > 0 || c.LocalSlots == 0 {
			return nil, withCode(exitBadInput, fmt.Errorf("--join, --min-peers and --local-slots 0 need a swarm: %w", errNoSwarm))
		}
		fmt.Fprintln(os.Stderr, "p2pc: no swarm secret, so this job runs on this machine only and looks for no peers ('p2pc swarm init' makes a swarm)")
		return &submitterSwarm{name: host}, nil
	}
	creds, err := g.creds()
	if err != nil {
		return nil, err
	}
	// A private folder per run (several jobs may be submitted at once),
	// owned through its lock: those of runs that died are swept.
	own, err := submitDir(g)
	if err != nil {
		return nil, err
	}
	dataDir := own.Path
	adv := ""
	if len(static) > 0 {
		adv = transport.LocalIPFor(static[0].Addr)
	}
	n, err := node.New(node.Config{
		Name:    member,
		Slots:   0,
		DataDir: dataDir,
		// The run's folder goes when it ends (or is swept when it died):
		// the job's blocks published there need not be fsynced.
		EphemeralStore: true,
		Listen:         c.Listen,
		Advertise:      adv,
		Version:        version,
		Creds:          creds,
		Logger:         g.Logger,
	})
	if err != nil {
		own.Remove()
		return nil, withCode(exitBadInput, err)
	}
	nctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := n.Serve(nctx); err != nil {
			g.Logger.Warn("submitter node", "err", err)
		}
	}()
	// In an invite-only swarm the coordinator refuses the peers the
	// creator revoked: its list, refreshed while the run lasts.
	if err := keepRevocations(nctx, g, creds, defaultRevocationPoll); err != nil {
		cancel()
		wg.Wait()
		own.Remove()
		return nil, err
	}
	addrs := static.Addrs()
	presence, err := n.StartPresence(ctx, node.PresenceConfig{MDNS: !c.NoMDNS, Join: addrs, Timing: discovery.SubmitterTiming(), QuietDeaths: true})
	if err != nil {
		cancel()
		wg.Wait()
		own.Remove()
		return nil, withCode(exitBadInput, err)
	}
	sw := &node.Swarm{Self: member, Static: addrs, Members: presence, Conns: n.Conns(), Logger: g.Logger}
	return &submitterSwarm{
		name:    host,
		member:  member,
		remote:  &job.RemoteOptions{Swarm: sw, Store: n.Store(), Conns: n.Conns(), Addr: n.Addr()},
		members: presence.Members,
		self:    swarmjobs.Member{Name: member, ID: n.ID().String(), Addr: n.Addr()},
		conns:   n.Conns(),
		halt: func() {
			cancel()
			wg.Wait()
			tr.mark("submitter node stopped (left the membership)")
			own.Remove()
			tr.mark("submitter folder removed")
		},
	}, nil
}

// submitDir makes this run's folder in DATA/submit, after removing those
// of runs that died (whose lock it can take).
func submitDir(g *Globals) (*dirlock.Dir, error) {
	parent := filepath.Join(g.Data, "submit")
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("submitter folder: %w", err)
	}
	if removed, err := dirlock.Sweep(parent, ""); len(removed) > 0 || err != nil {
		g.Logger.Debug("swept submitter folders of dead runs", "removed", removed, "err", err)
	}
	d, err := dirlock.Make(parent, strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, fmt.Errorf("submitter folder: %w", err)
	}
	return d, nil
}
