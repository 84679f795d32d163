package discovery

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/memberlist"

	"github.com/p2pc/p2pc/internal/transport"
)

// Meta is what a member tells the others about itself, spread by
// memberlist with every alive message.
type Meta struct {
	// Name is the member's node name (always its memberlist name).
	Name string
	// ID is the member's node ID as it claims it (gossip is sealed with
	// the swarm key, so only members claim). Connections prove the ID
	// again in their TLS handshake; that proof is what names a peer.
	ID string
	// GRPCAddr is the address of the member's peer gRPC service, in the
	// canonical form of package transport: host:port for tcp,
	// scheme://... for another transport.
	GRPCAddr string
	// OS and Arch are the member's GOOS and GOARCH.
	OS, Arch string
	// Version is the p2pc release the member runs.
	Version string
	// Proto is the peer protocol version. Members whose Proto differs
	// from this node's are listed with Compatible false.
	Proto int
	// Slots is how many tasks the member runs at once; FreeSlots how many
	// of them are free now.
	Slots, FreeSlots int
	// Sandbox says how the member confines tasks, as its `p2pc join`
	// prints it ("files=landlock-v7 network=netns syscalls=seccomp
	// user=nobody(65534)"); "" from a member that does not say.
	Sandbox string
	// GPUs summarizes the GPUs the member offers as GPU slots (counted
	// in Slots): "2 × NVIDIA H200"; "" for none.
	GPUs string
}

// wireMeta is Meta as carried in memberlist's node metadata: JSON with
// one-letter keys, zero values left out. The name is not carried (it is
// the memberlist node name). L marks a member that is leaving, so that its
// departure is reported as Leave rather than Dead. G is a tcp address
// (host:port, as every version reads it); U an address of another
// transport, with its scheme, which versions before the transport seam
// ignore: to them such a member has no address, and is skipped.
type wireMeta struct {
	GRPC    string `json:"g,omitempty"`
	URL     string `json:"u,omitempty"`
	ID      string `json:"i,omitempty"`
	OS      string `json:"o,omitempty"`
	Arch    string `json:"a,omitempty"`
	Version string `json:"v,omitempty"`
	Proto   int    `json:"p,omitempty"`
	Slots   int    `json:"s,omitempty"`
	Free    int    `json:"f,omitempty"`
	Leaving bool   `json:"l,omitempty"`
	Sandbox string `json:"x,omitempty"`
	GPUs    string `json:"d,omitempty"`
}

// encodeMeta encodes m, failing if the result exceeds memberlist's limit
// (memberlist.MetaMaxSize, 512 bytes).
func encodeMeta(m Meta, leaving bool) ([]byte, error) {
	w := wireMeta{
		ID: m.ID, OS: m.OS, Arch: m.Arch, Version: m.Version,
		Proto: m.Proto, Slots: m.Slots, Free: m.FreeSlots, Leaving: leaving, Sandbox: m.Sandbox, GPUs: m.GPUs,
	}
	if m.GRPCAddr != "" {
		if scheme, _ := transport.Split(m.GRPCAddr); scheme == transport.DefaultScheme {
			w.GRPC = transport.Canonical(m.GRPCAddr)
		} else {
			w.URL = m.GRPCAddr
		}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encode member metadata: %w", err)
	}
	if len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("encode member metadata: %d bytes, more than memberlist's limit of %d", len(b), memberlist.MetaMaxSize)
	}
	return b, nil
}

// decodeMeta decodes the metadata of the member called name.
func decodeMeta(name string, b []byte) (m Meta, leaving bool, err error) {
	m.Name = name
	if len(b) == 0 {
		return m, false, fmt.Errorf("member %q: no metadata", name)
	}
	var w wireMeta
	if err := json.Unmarshal(b, &w); err != nil {
		return m, false, fmt.Errorf("member %q: decode metadata: %w", name, err)
	}
	m.ID, m.OS, m.Arch, m.Version = w.ID, w.OS, w.Arch, w.Version
	switch {
	case w.GRPC != "":
		m.GRPCAddr = transport.Canonical(w.GRPC)
	case w.URL != "":
		m.GRPCAddr = transport.Canonical(w.URL)
	}
	m.Proto, m.Slots, m.FreeSlots, m.Sandbox, m.GPUs = w.Proto, w.Slots, w.Free, w.Sandbox, w.GPUs
	return m, w.Leaving, nil
}
