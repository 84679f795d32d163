package sched

import (
	"testing"

	"github.com/p2pc/p2pc/internal/digest"
)

func TestTally(t *testing.T) {
	yes := func() bool { return true }
	no := func() bool { return false }
	for _, c := range []struct {
		name string
		b    ballot
		want verdict
	}{
		{"one vote, quorum 1", ballot{digests: ds("a"), quorum: 1, started: 1, maxReplicas: 1, otherVoter: no},
			verdict{action: accept, digest: dg("a")}},
		{"quorum reached", ballot{digests: ds("a", "a"), quorum: 2, started: 2, maxReplicas: 3, otherVoter: no},
			verdict{action: accept, digest: dg("a")}},
		{"short of quorum, replica running", ballot{digests: ds("a"), quorum: 2, started: 2, running: 1, maxReplicas: 2, otherVoter: no},
			verdict{action: wait, digest: dg("a")}},
		{"short of quorum, nothing running: ask for the rest", ballot{digests: ds("a"), quorum: 3, started: 3, maxReplicas: 3, otherVoter: no},
			verdict{action: more, digest: dg("a"), n: 2}},
		{"disagree, room and a voter: one more", ballot{digests: ds("a", "b"), quorum: 2, started: 2, maxReplicas: 3, otherVoter: yes},
			verdict{action: more, digest: dg("a"), n: 1, disputed: true}},
		{"disagree, one already queued: wait", ballot{digests: ds("a", "b"), quorum: 2, started: 2, need: 1, maxReplicas: 4, otherVoter: yes},
			verdict{action: wait, digest: dg("a"), disputed: true}},
		{"disagree at the cap: no quorum", ballot{digests: ds("a", "b"), quorum: 2, started: 2, maxReplicas: 2, otherVoter: yes},
			verdict{action: fail, digest: dg("a"), disputed: true}},
		{"disagree, no other voter: no quorum", ballot{digests: ds("b", "a"), quorum: 2, started: 2, maxReplicas: 5, otherVoter: no},
			verdict{action: fail, digest: dg("a"), disputed: true}},
		{"disputed, majority with quorum", ballot{digests: ds("a", "b", "a"), quorum: 2, disputed: true, started: 3, maxReplicas: 3, otherVoter: yes},
			verdict{action: accept, digest: dg("a"), disputed: true}},
		{"disputed, quorum but no strict majority", ballot{digests: ds("a", "b", "a", "b"), quorum: 2, disputed: true, started: 4, maxReplicas: 4, otherVoter: no},
			verdict{action: fail, digest: dg("a"), disputed: true}},
		{"disputed, replica still running", ballot{digests: ds("a", "b", "a"), quorum: 2, disputed: true, started: 4, running: 1, maxReplicas: 4, otherVoter: no},
			verdict{action: wait, digest: dg("a"), disputed: true}},
		{"disputed stays disputed with one digest left", ballot{digests: ds("a"), quorum: 2, disputed: true, started: 2, maxReplicas: 2, otherVoter: no},
			verdict{action: fail, digest: dg("a"), disputed: true}},
		{"disputed, reopened after an exclusion: more", ballot{digests: ds("a"), quorum: 2, disputed: true, started: 2, maxReplicas: 3, otherVoter: yes},
			verdict{action: more, digest: dg("a"), n: 1, disputed: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := tally(c.b); got != c.want {
				t.Errorf("tally = %+v, want %+v", got, c.want)
			}
		})
	}
}

// dg is a digest spelled s (zero-padded): digests sort as their names do.
func dg(s string) digest.ID {
	var d digest.ID
	copy(d[:], s)
	return d
}

func ds(names ...string) []digest.ID {
	out := make([]digest.ID, len(names))
	for i, n := range names {
		out[i] = dg(n)
	}
	return out
}

// voteText is how a failed vote names the votes of peers that each voted
// for a digest of their own: "digest <12 hex digits> from peer; ...".
func voteText(pairs ...string) string {
	s := ""
	for i := 0; i < len(pairs); i += 2 {
		if s != "" {
			s += "; "
		}
		s += "digest " + dg(pairs[i+1]).String()[:12] + " from " + pairs[i]
	}
	return s
}

func TestDescribeVotes(t *testing.T) {
	id := "@abcd-efgh-ijkl-mnop-qrst-uvwx-yz23" // a node ID, as peers are named
	for _, c := range []struct {
		name  string
		votes []vote
		want  string
	}{
		{"none", nil, ""},
		{"one", []vote{{peer: "a", digest: dg("x")}}, "digest " + dg("x").String()[:12] + " from a"},
		{"node IDs are left out", []vote{{peer: "a" + id, digest: dg("x")}, {peer: "b" + id, digest: dg("y")}}, voteText("a", "x", "b", "y")},
		{"grouped, most votes first", []vote{{peer: "a", digest: dg("x")}, {peer: "b", digest: dg("y")}, {peer: "c", digest: dg("y")}},
			"digest " + dg("y").String()[:12] + " from b, c; digest " + dg("x").String()[:12] + " from a"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := describeVotes(c.votes); got != c.want {
				t.Errorf("describeVotes = %q, want %q", got, c.want)
			}
		})
	}
}

// BenchmarkTally: the vote of a task of one replica, as each result of
// an unverified job is counted.
func BenchmarkTally(b *testing.B) {
	ballot := ballot{quorum: 1, started: 1, maxReplicas: 1, digests: []digest.ID{dg("d")}}
	for b.Loop() {
		if tally(ballot).action != accept {
			b.Fatal("not accepted")
		}
	}
}
