package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestReadPhaseTrace(t *testing.T) {
	// Two runs of a job reuse lease 1; run 2's marks go to its own
	// record. A mark of an unknown lease or phase is ignored.
	trace := `1000 7 c.lease 1
1100 7 c.sent 1
1300 9 p.recv 1
1350 9 p.admit 1
1360 9 p.exec 1
1400 9 p.start 1
1600 9 p.end 1
1650 9 p.sent 1
1800 7 c.recv 1
1900 7 c.settled 1
2000 8 c.lease 1
2050 9 p.recv 5
2100 8 c.sent 1
2150 9 p.bogus 1
`
	// A third run's peer marks in another file, after run 1 settled.
	peers := "2200 9 p.recv 1\n"
	path := filepath.Join(t.TempDir(), "trace")
	if err := os.WriteFile(path, []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	peerPath := filepath.Join(t.TempDir(), "peers")
	if err := os.WriteFile(peerPath, []byte(peers), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadPhaseTrace(path, peerPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	if got := recs[1][1].UnixNano(); got != 2100 {
		t.Errorf("run 2's c.sent at %d, want 2100", got)
	}
	if got := recs[1][2].UnixNano(); got != 2200 {
		t.Errorf("run 2's p.recv at %d, want 2200 (not lease 5's)", got)
	}
	steps := PhaseSteps(recs)
	want := map[string]time.Duration{"c.lease>c.sent": 100, "c.sent>p.recv": 200, "p.recv>p.admit": 50, "p.start>p.end": 200, "c.lease>p.end": 600, "c.lease>c.settled": 900}
	for _, s := range steps {
		if w, ok := want[s.From+">"+s.To]; ok && s.P50 != w {
			t.Errorf("%s -> %s: p50 %v, want %v", s.From, s.To, s.P50, w)
		}
	}
	if s := steps[0]; s.N != 2 {
		t.Errorf("c.lease -> c.sent over %d records, want 2", s.N)
	}
	if s := steps[2]; s.N != 1 { // run 2 has no p.admit
		t.Errorf("p.recv -> p.admit over %d records, want 1", s.N)
	}
}
