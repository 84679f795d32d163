package report

import "testing"

func TestSplitPeer(t *testing.T) {
	const id = "ze6b-wvbs-zy6k-aeq6-cex7-oow3-6i45"
	tests := []struct{ key, name, id string }{
		{"p1@" + id, "p1", id},
		{"a@b@" + id, "a@b", id},
		{"host", "host", ""},
		{"user@host", "user@host", ""},
		{"p1@" + id[:33], "p1@" + id[:33], ""},
		{"", "", ""},
	}
	for _, tc := range tests {
		n, i := SplitPeer(tc.key)
		if n != tc.name || i != tc.id {
			t.Errorf("SplitPeer(%q) = %q, %q; want %q, %q", tc.key, n, i, tc.name, tc.id)
		}
	}
	r := &Report{Tasks: []Task{{Peer: "p1@" + id, Attempts: []Attempt{{Peer: "p1@" + id}, {Peer: "local"}}, Votes: []Vote{{Peer: "p2@" + id}}}}}
	r.splitPeerIDs()
	r.splitPeerIDs() // idempotent
	tk := r.Tasks[0]
	if tk.Peer != "p1" || tk.PeerID != id || tk.Attempts[0].PeerID != id || tk.Attempts[1].Peer != "local" || tk.Votes[0].Peer != "p2" {
		t.Fatalf("%+v", tk)
	}
}
