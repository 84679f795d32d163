package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/node"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/internal/transport"
)

// PeersCmd is `p2pc peers`: list the live swarm.
type PeersCmd struct {
	Join   []string      `help:"Peers to ask (host or host:port; port 7070 when none is given), besides those found with mDNS." sep:"," placeholder:"ADDR"`
	NoMDNS bool          `name:"no-mdns" env:"P2PC_NO_MDNS" help:"Do not look for peers with mDNS."`
	Wait   time.Duration `help:"How long to look for peers." default:"2s"`
	JSON   bool          `help:"Print the members as JSON."`
}

// Run joins the membership briefly as an observer, lists it and leaves.
func (c *PeersCmd) Run(g *Globals) error {
	static, err := discovery.ParseAddrs(c.Join)
	if err != nil {
		return withCode(exitBadInput, fmt.Errorf("--join: %w", err))
	}
	if len(static) == 0 && c.NoMDNS {
		return withCode(exitBadInput, fmt.Errorf("nothing to ask: give --join addresses or allow mDNS"))
	}
	creds, err := g.creds()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(g.Ctx, c.Wait+5*time.Second)
	defer cancel()
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
	mem, err := discovery.Start(ctx, discovery.Config{
		Name:          fmt.Sprintf("%s-peers-%d", host, os.Getpid()),
		BindAddr:      bind,
		AdvertiseAddr: adv,
		Logger:        g.Logger,
		SecretKey:     creds.GossipKey(),
		Meta: func() discovery.Meta {
			return discovery.Meta{Version: version, Proto: node.ProtocolVersion, ID: creds.ID().String()}
		},
	})
	if err != nil {
		return fmt.Errorf("peers: %w", err)
	}
	defer mem.Close()
	conns := transfer.NewPool(transport.Default(), creds.ClientTLS())
	defer conns.Close()
	resolver := &discovery.Resolver{Addrs: static.Addrs(), Resolve: node.ResolveStatic(conns)}
	found, err := resolver.Find(ctx)
	if errs, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range errs.Unwrap() {
			fmt.Fprintf(os.Stderr, "p2pc: %v\n", e) // "peer ADDR: why", as before
		}
	}
	for _, p := range found {
		if _, err := mem.Join(ctx, []string{p.GossipAddr}); err != nil {
			fmt.Fprintf(os.Stderr, "p2pc: join %s: %v\n", p.GossipAddr, err)
		}
	}
	if !c.NoMDNS {
		md, err := discovery.NewMDNS(discovery.MDNSConfig{Logger: g.Logger, QueryTimeout: c.Wait / 2})
		if err != nil {
			return fmt.Errorf("peers: %w", err)
		}
		defer md.Close()
		jctx, jcancel := context.WithTimeout(ctx, c.Wait)
		_ = mem.JoinFrom(jctx, md, c.Wait/2)
		jcancel()
	} else {
		select {
		case <-time.After(min(c.Wait, 500*time.Millisecond)):
		case <-ctx.Done():
		}
	}
	var members []discovery.Member
	for _, m := range mem.Members() {
		if m.Name != fmt.Sprintf("%s-peers-%d", host, os.Getpid()) {
			members = append(members, m)
		}
	}
	_ = mem.Leave(time.Second)
	if c.JSON {
		out := make([]peerJSON, len(members))
		for i, m := range members {
			out[i] = toPeerJSON(m)
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(members) == 0 {
		fmt.Fprintln(os.Stderr, "no peers found")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tNODE ID\tADDRESS\tOS/ARCH\tSLOTS\tFREE\tGPUS\tVERSION\tSTATE\tLAST SEEN\tTASKS CONFINED")
	for _, m := range members {
		state := m.State
		if !m.Compatible {
			state += " (incompatible)"
		}
		confined := m.Sandbox
		if confined == "" {
			confined = "(not said)"
		}
		gpus := m.GPUs
		if gpus == "" {
			gpus = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s/%s\t%d\t%d\t%s\t%s\t%s\t%s ago\t%s\n", m.Name, m.ID, m.GRPCAddr, m.OS, m.Arch, m.Slots, m.FreeSlots, gpus, m.Version, state, time.Since(m.LastSeen).Round(100*time.Millisecond), confined)
	}
	return w.Flush()
}

// peerJSON is a member as `p2pc peers --json` prints it: snake_case keys,
// as in report.json.
type peerJSON struct {
	Name       string    `json:"name"`
	PeerID     string    `json:"peer_id"`
	GRPCAddr   string    `json:"grpc_addr"`
	GossipAddr string    `json:"gossip_addr"`
	OS         string    `json:"os"`
	Arch       string    `json:"arch"`
	Version    string    `json:"version"`
	Proto      int       `json:"proto"`
	Compatible bool      `json:"compatible"`
	Slots      int       `json:"slots"`
	FreeSlots  int       `json:"free_slots"`
	State      string    `json:"state"`
	LastSeen   time.Time `json:"last_seen"`
	// Sandbox is how the peer confines tasks (its `tasks confined:`
	// line; "" from a peer that does not say).
	Sandbox string `json:"sandbox"`
	// GPUs summarizes the GPUs it offers as GPU slots ("2 × NVIDIA
	// H200"), counted in slots; "" for none.
	GPUs string `json:"gpus,omitempty"`
}

func toPeerJSON(m discovery.Member) peerJSON {
	return peerJSON{
		Name: m.Name, PeerID: m.ID, GRPCAddr: m.GRPCAddr, GossipAddr: m.GossipAddr, OS: m.OS, Arch: m.Arch,
		Version: m.Version, Proto: m.Proto, Compatible: m.Compatible, Slots: m.Slots, FreeSlots: m.FreeSlots,
		State: m.State, LastSeen: m.LastSeen.UTC(), Sandbox: m.Sandbox, GPUs: m.GPUs,
	}
}
