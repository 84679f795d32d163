package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/node"
	"github.com/p2pc/p2pc/internal/swarmjobs"
	"github.com/p2pc/p2pc/spec"
)

// jobMembers are the members that may serve the Jobs protocol: alive,
// compatible, with a gRPC address.
func jobMembers(ms []discovery.Member) []swarmjobs.Member {
	var out []swarmjobs.Member
	for _, m := range ms {
		if m.Compatible && m.GRPCAddr != "" && m.ID != "" && m.State == discovery.StateAlive {
			out = append(out, swarmjobs.Member{Name: m.Name, ID: m.ID, Addr: m.GRPCAddr})
		}
	}
	return out
}

// ownerWait is how long an owned job waits for a peer while none can take
// the work left before it fails (job.RunOptions.WaitPeers).
const ownerWait = 5 * time.Minute

// jobsService makes the Jobs service of a `p2pc join` member: it holds
// copies of the swarm's jobs and, unless noOwn, owns jobs handed to it,
// running their coordinator in this process through the node's store,
// connections and membership (presence, set once it started).
func jobsService(g *Globals, n *node.Node, presence **node.Presence, static []string, noOwn bool, retain time.Duration, keep jobsKeep) (*swarmjobs.Service, error) {
	svc, err := swarmjobs.New(swarmjobs.Config{
		Dir:       filepath.Join(g.Data, "jobs"),
		Name:      n.Name(),
		ID:        n.ID(),
		Addr:      n.Addr(),
		NoOwn:     noOwn,
		Retain:    retain,
		Disk:      keep.Disk,
		LostAfter: keep.LostAfter,
		Members: func() []swarmjobs.Member {
			if *presence == nil {
				return nil
			}
			return jobMembers((*presence).Members())
		},
		Gone: func(name, id string) bool {
			if *presence == nil {
				return false
			}
			return memberGone((*presence).Members(), name, id)
		},
		Dial:   dialPool(n.Conns()),
		Logger: g.Logger,
		Run: func(ctx context.Context, j swarmjobs.Job, progress func(done, failed, running, total int)) error {
			return runOwned(ctx, g, n, *presence, static, j, progress)
		},
	})
	if err != nil {
		return nil, withCode(exitLocalDisk, err)
	}
	svc.Register(n.Services())
	return svc, nil
}

// runOwned runs a job this member owns: job.Prepare and job.Run, as
// `p2pc run --local-slots 0` would, with this member's node identity.
// The member's own slots take part through its node, like any peer's.
func runOwned(ctx context.Context, g *Globals, n *node.Node, presence *node.Presence, static []string, j swarmjobs.Job, progress func(done, failed, running, total int)) error {
	js, err := spec.ParseFile(j.Spec)
	if err != nil {
		return err
	}
	js.PluginPath = j.Plugin
	for i, in := range js.Inputs {
		p, ok := j.Inputs[in.Name]
		if !ok {
			return fmt.Errorf("job %s: input %q is not in its bundle", j.ID[:12], in.Name)
		}
		js.Inputs[i].Path = p
	}
	p, err := job.Prepare(ctx, js, job.PrepareOptions{
		OutDir:    j.Out,
		CacheDir:  filepath.Join(g.Data, "plugins"),
		PluginKey: j.PluginKey,
		Version:   version,
		Logger:    g.Logger,
	})
	if err != nil {
		return err
	}
	defer p.Release()
	if p.ID.String() != j.ID {
		return fmt.Errorf("job %s: its bundle makes job %s (spec, plugin or inputs changed on the way)", j.ID[:12], p.ID.String()[:12])
	}
	var members node.Members
	if presence != nil {
		members = presence
	}
	sw := &node.Swarm{Static: static, Members: members, Conns: n.Conns(), Logger: g.Logger}
	_, err = job.Run(ctx, p, job.RunOptions{
		Slots:     0,
		Node:      n.Name(),
		Events:    ownedEvents(progress),
		Logger:    g.Logger,
		Remote:    &job.RemoteOptions{Swarm: sw, Store: n.Store(), Conns: n.Conns(), Addr: n.Addr()},
		WaitPeers: ownerWait,
		TrustFile: filepath.Join(g.Data, "trust.json"),
		Version:   version,
		Epoch:     j.Epoch,
		Replicate: j.Replicate,
		Departed:  j.Departed,
	})
	switch {
	case errors.Is(err, job.ErrFenced):
		return fmt.Errorf("%w: %w", swarmjobs.ErrFenced, err)
	case err != nil && ctx.Err() != nil:
		return errors.Join(err, ctx.Err())
	}
	return err
}

// memberGone reports whether the membership ms has no member alive or
// suspect of that name (and node ID id, when not empty): gossip declared
// it dead, or it never was. The name counts: a plain run's node shares
// its node ID with the next run, or a `p2pc join`, of the same machine.
func memberGone(ms []discovery.Member, name, id string) bool {
	for _, m := range ms {
		if m.Name == name && (id == "" || m.ID == id) && m.State != discovery.StateDead {
			return false
		}
	}
	return true
}

// ownedEvents passes a job's counts to progress.
type ownedEvents func(done, failed, running, total int)

func (f ownedEvents) Started(total, done int)            { f(done, 0, 0, total) }
func (f ownedEvents) Counts(c job.Counts)                { f(c.Done, c.Failed, c.Running, c.Total) }
func (ownedEvents) TaskDone(string, bool)                {}
func (ownedEvents) TaskRetry(string, string, error)      {}
func (ownedEvents) TaskProgress(string, float64, string) {}
func (ownedEvents) TaskPartial(string, []byte)           {}
