package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/node"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/transport"
	"github.com/p2pc/p2pc/internal/trust"
)

// observer is a short-lived member of the swarm's gossip that takes no
// work: `p2pc peers`, `p2pc jobs` and the commands that talk to the
// members (attach, fetch, cancel, run --detach) list the swarm with it.
type observer struct {
	name  string
	mem   *discovery.Membership
	conns *transfer.Pool
	creds *trust.Creds
}

// observe joins the membership through the static addresses join and,
// unless noMDNS, mDNS (looking for wait), as an observer.
func observe(ctx context.Context, g *Globals, join []string, noMDNS bool, wait time.Duration) (*observer, error) {
	static, err := discovery.ParseAddrs(join)
	if err != nil {
		return nil, withCode(exitBadInput, fmt.Errorf("--join: %w", err))
	}
	if len(static) == 0 && noMDNS {
		return nil, withCode(exitBadInput, fmt.Errorf("nothing to ask: give --join addresses or allow mDNS"))
	}
	creds, err := g.creds()
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	// Gossip from the address the kernel would use towards the peers (or
	// the mDNS group): the LAN address, or loopback in a test namespace.
	target := "224.0.0.251:5353"
	if len(static) > 0 {
		target = static[0].Addr
	}
	adv := transport.LocalIPFor(target)
	bind := adv
	if bind == "" {
		bind = "0.0.0.0"
	}
	o := &observer{name: fmt.Sprintf("%s-peers-%d", host, os.Getpid()), creds: creds}
	o.mem, err = discovery.Start(ctx, discovery.Config{
		Name:          o.name,
		BindAddr:      bind,
		AdvertiseAddr: adv,
		Logger:        g.Logger,
		SecretKey:     creds.GossipKey(),
		Meta: func() discovery.Meta {
			return discovery.Meta{Version: version, Proto: node.ProtocolVersion, ID: creds.ID().String()}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("peers: %w", err)
	}
	o.conns = transfer.NewPool(transport.Default(), creds.ClientTLS())
	resolver := &discovery.Resolver{Addrs: static.Addrs(), Resolve: node.ResolveStatic(o.conns)}
	found, err := resolver.Find(ctx)
	if errs, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range errs.Unwrap() {
			fmt.Fprintf(os.Stderr, "p2pc: %v\n", e) // "peer ADDR: why", as before
		}
	}
	for _, p := range found {
		if _, err := o.mem.Join(ctx, []string{p.GossipAddr}); err != nil {
			fmt.Fprintf(os.Stderr, "p2pc: join %s: %v\n", p.GossipAddr, err)
		}
	}
	if !noMDNS {
		md, err := discovery.NewMDNS(discovery.MDNSConfig{Logger: g.Logger, QueryTimeout: wait / 2})
		if err != nil {
			o.close()
			return nil, fmt.Errorf("peers: %w", err)
		}
		defer md.Close()
		jctx, jcancel := context.WithTimeout(ctx, wait)
		_ = o.mem.JoinFrom(jctx, md, wait/2)
		jcancel()
	} else {
		select {
		case <-time.After(min(wait, 500*time.Millisecond)):
		case <-ctx.Done():
		}
	}
	return o, nil
}

// members lists the swarm's members but the observer.
func (o *observer) members() []discovery.Member {
	var out []discovery.Member
	for _, m := range o.mem.Members() {
		if m.Name != o.name {
			out = append(out, m)
		}
	}
	return out
}

// printJSON prints v on stdout as indented JSON (peers --json, jobs
// --json).
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// close leaves the membership and closes the connections.
func (o *observer) close() {
	_ = o.mem.Leave(time.Second)
	o.mem.Close()
	o.conns.Close()
}
