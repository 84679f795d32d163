package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

func TestMemberJoinedRe(t *testing.T) {
	line := `time=2026-11-24T04:00:00.000Z level=INFO msg="member joined" component=membership member=peer007 gossip=10.213.1.7:7946 grpc=10.213.1.7:40000 compatible=true`
	m := memberJoinedRe.FindStringSubmatch(line)
	if m == nil || m[2] != "peer007" || m[1] != "2026-11-24T04:00:00.000Z" {
		t.Errorf("match %q", m)
	}
	names := map[string]bool{"peer001": true, "peer002": true, "peer003": true}
	log := `time=2026-11-24T04:00:01.000Z level=INFO msg="member joined" member=peer001
time=2026-11-24T04:00:01.500Z level=INFO msg="member joined" member=peer002
time=2026-11-24T04:00:02.000Z level=INFO msg="member left" member=peer003
time=2026-11-24T04:00:02.250Z level=INFO msg="member joined" member=peer003
time=2026-11-24T04:00:03.000Z level=INFO msg="member joined" member=peer002
time=2026-11-24T04:00:04.000Z level=INFO msg="member joined" member=observer-9
`
	n, at := membersSeen(log, "peer001", names)
	if want := time.Date(2026, 11, 24, 4, 0, 2, 250e6, time.UTC); n != 2 || !at.Equal(want) {
		t.Errorf("seen %d at %v, want 2 at %v (self, rejoins and strangers left out)", n, at, want)
	}
	if memberJoinedRe.MatchString(`level=INFO msg="member left" member=peer007`) {
		t.Error("a member that left matched")
	}
}

func TestEnrolTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	rep := &report.Report{Tasks: []report.Task{
		{Attempts: []report.Attempt{{Peer: "a", Start: at(500)}, {Peer: "b", Start: at(900)}}},
		{Attempts: []report.Attempt{{Peer: "a", Start: at(700)}}},
		{Attempts: []report.Attempt{{Peer: "c", Start: at(1200)}}},
	}}
	for _, c := range []struct {
		peers  int
		want   float64
		leased int
	}{
		{3, 1.2, 3},        // c was the last to get its first lease
		{4, math.NaN(), 3}, // a fourth peer never got one
	} {
		got, n := enrolTime(rep, t0, c.peers)
		if n != c.leased || !(math.IsNaN(c.want) && math.IsNaN(got) || math.Abs(got-c.want) < 1e-9) {
			t.Errorf("%d peers: %v, %d leased; want %v, %d", c.peers, got, n, c.want, c.leased)
		}
	}
}

func TestCPUPerPeer(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// The process used 0.2 s of CPU per second, sampled every 100 ms.
	sub := &harness.Submission{Started: t0}
	for i := range 31 {
		d := time.Duration(i) * 100 * time.Millisecond
		sub.CPU = append(sub.CPU, harness.CPUSample{At: d, CPU: d / 5})
	}
	for _, c := range []struct {
		name     string
		from, to time.Duration
		peers    int
		want     float64
	}{
		{"a whole window", time.Second, 2 * time.Second, 4, 0.05},
		{"between samples", 1050 * time.Millisecond, 2550 * time.Millisecond, 2, 0.1},
		{"too short", time.Second, 1200 * time.Millisecond, 1, math.NaN()},
		{"past the samples", 2 * time.Second, 4 * time.Second, 1, math.NaN()},
	} {
		got := cpuPerPeer(sub, t0.Add(c.from), t0.Add(c.to), c.peers)
		if !(math.IsNaN(c.want) && math.IsNaN(got) || math.Abs(got-c.want) < 1e-9) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestScaleGrowth(t *testing.T) {
	pt := func(n int, mem, cpu float64) scalePoint {
		return scalePoint{Peers: n, Membership: Interval{N: 5, Median: mem}, Enrol: Interval{N: 5, Median: mem},
			IdleCPU: Interval{N: 5, Median: cpu}, BusyCPU: Interval{N: 5, Median: cpu}}
	}
	// Membership: x4 peers, x2 time (slower than linear), then x3 peers,
	// x6 time (faster). CPU per peer flat (linear total), then doubling
	// (total x6 for x3 peers: faster).
	g := strings.Join(scaleGrowth([]scalePoint{pt(8, 1, 0.001), pt(32, 2, 0.001), pt(96, 12, 0.002)}), "\n")
	for _, want := range []string{
		"time to a full membership: 8→32 peers (x4.0): x2.00, slower than linear; 32→96 peers (x3.0): x6.00, **faster than linear**",
		"coordinator CPU while idle (total): 8→32 peers (x4.0): x4.00, about linear; 32→96 peers (x3.0): x6.00, **faster than linear**",
	} {
		if !strings.Contains(g, want) {
			t.Errorf("growth notes lack %q:\n%s", want, g)
		}
	}
}

func TestQuietWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ok, lost := report.OutcomeOK, report.OutcomeLost
	rep := &report.Report{Tasks: []report.Task{
		{Attempts: []report.Attempt{{Start: at(0), End: at(3000), Outcome: ok}}},
		{Attempts: []report.Attempt{{Start: at(200), End: at(900), Outcome: lost}, {Start: at(3500), End: at(6500), Outcome: ok}}},
		{Attempts: []report.Attempt{{Start: at(400), End: at(3400), Outcome: ok}}},
	}}
	from, to := quietWindow(rep)
	if !from.Equal(at(400)) || !to.Equal(at(3000)) {
		t.Errorf("window %v to %v, want 400 ms to 3000 ms (a lost attempt's end and a later lease left out)", from.Sub(t0), to.Sub(t0))
	}
}
