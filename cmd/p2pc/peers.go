package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/p2pc/p2pc/discovery"
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
	ctx, cancel := context.WithTimeout(g.Ctx, c.Wait+5*time.Second)
	defer cancel()
	o, err := observe(ctx, g, c.Join, c.NoMDNS, c.Wait)
	if err != nil {
		return err
	}
	members := o.members()
	o.close()
	if c.JSON {
		out := make([]peerJSON, len(members))
		for i, m := range members {
			out[i] = toPeerJSON(m)
		}
		return printJSON(out)
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
