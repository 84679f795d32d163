package discovery

import (
	"net"
	"strings"
	"testing"

	"github.com/hashicorp/mdns"
)

// The decoders below read what anyone on the LAN may send before any
// handshake: an mDNS answer's TXT record, SRV port and addresses. They
// must not panic, and what they accept must be usable addresses.

func FuzzPeerFromEntry(f *testing.F) {
	f.Add("n1._p2pc._tcp.local.", "name=n1\x00grpc=10.0.0.1:7000\x00gossip=:7946\x00v=2", 7000, []byte{10, 0, 0, 1})
	f.Add("", "grpc=[::1]:1", 0, []byte(nil))
	f.Add(`a\.b._p2pc._tcp.local.`, "name=\x00grpc=:0", 1, []byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, name, txt string, port int, ip []byte) {
		e := &mdns.ServiceEntry{Name: name, Port: port, InfoFields: strings.Split(txt, "\x00")}
		if len(ip) == 4 {
			e.AddrV4 = net.IP(ip)
		}
		p, err := peerFromEntry(e)
		if err != nil {
			return
		}
		if p.Name == "" {
			t.Fatal("accepted a peer without a name")
		}
		if _, _, err := net.SplitHostPort(p.Addr); err != nil {
			t.Fatalf("accepted address %q: %v", p.Addr, err)
		}
	})
}

func FuzzDecodeMeta(f *testing.F) {
	b, _ := encodeMeta(Meta{GRPCAddr: "10.0.0.1:7000", ID: "abcd", OS: "linux", Arch: "amd64", Proto: 2, Slots: 4}, false)
	f.Add(b)
	f.Add([]byte(`{"g":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, leaving, err := decodeMeta("n", b)
		if err != nil {
			return
		}
		if m.Name != "n" {
			t.Fatal("name not the member's")
		}
		if _, err := encodeMeta(m, leaving); err != nil && len(b) <= 512 {
			// A decoded meta re-encodes unless it was over the limit.
			if !strings.Contains(err.Error(), "limit") {
				t.Fatal(err)
			}
		}
	})
}
