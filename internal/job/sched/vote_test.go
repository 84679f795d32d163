package sched

import "testing"

func TestTally(t *testing.T) {
	yes := func() bool { return true }
	no := func() bool { return false }
	for _, c := range []struct {
		name string
		b    ballot
		want verdict
	}{
		{"one vote, quorum 1", ballot{digests: []string{"a"}, quorum: 1, started: 1, maxReplicas: 1, otherVoter: no},
			verdict{action: accept, digest: "a"}},
		{"quorum reached", ballot{digests: []string{"a", "a"}, quorum: 2, started: 2, maxReplicas: 3, otherVoter: no},
			verdict{action: accept, digest: "a"}},
		{"short of quorum, replica running", ballot{digests: []string{"a"}, quorum: 2, started: 2, running: 1, maxReplicas: 2, otherVoter: no},
			verdict{action: wait, digest: "a"}},
		{"short of quorum, nothing running: ask for the rest", ballot{digests: []string{"a"}, quorum: 3, started: 3, maxReplicas: 3, otherVoter: no},
			verdict{action: more, digest: "a", n: 2}},
		{"disagree, room and a voter: one more", ballot{digests: []string{"a", "b"}, quorum: 2, started: 2, maxReplicas: 3, otherVoter: yes},
			verdict{action: more, digest: "a", n: 1, disputed: true}},
		{"disagree, one already queued: wait", ballot{digests: []string{"a", "b"}, quorum: 2, started: 2, need: 1, maxReplicas: 4, otherVoter: yes},
			verdict{action: wait, digest: "a", disputed: true}},
		{"disagree at the cap: no quorum", ballot{digests: []string{"a", "b"}, quorum: 2, started: 2, maxReplicas: 2, otherVoter: yes},
			verdict{action: fail, digest: "a", disputed: true}},
		{"disagree, no other voter: no quorum", ballot{digests: []string{"b", "a"}, quorum: 2, started: 2, maxReplicas: 5, otherVoter: no},
			verdict{action: fail, digest: "a", disputed: true}},
		{"disputed, majority with quorum", ballot{digests: []string{"a", "b", "a"}, quorum: 2, disputed: true, started: 3, maxReplicas: 3, otherVoter: yes},
			verdict{action: accept, digest: "a", disputed: true}},
		{"disputed, quorum but no strict majority", ballot{digests: []string{"a", "b", "a", "b"}, quorum: 2, disputed: true, started: 4, maxReplicas: 4, otherVoter: no},
			verdict{action: fail, digest: "a", disputed: true}},
		{"disputed, replica still running", ballot{digests: []string{"a", "b", "a"}, quorum: 2, disputed: true, started: 4, running: 1, maxReplicas: 4, otherVoter: no},
			verdict{action: wait, digest: "a", disputed: true}},
		{"disputed stays disputed with one digest left", ballot{digests: []string{"a"}, quorum: 2, disputed: true, started: 2, maxReplicas: 2, otherVoter: no},
			verdict{action: fail, digest: "a", disputed: true}},
		{"disputed, reopened after an exclusion: more", ballot{digests: []string{"a"}, quorum: 2, disputed: true, started: 2, maxReplicas: 3, otherVoter: yes},
			verdict{action: more, digest: "a", n: 1, disputed: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := tally(c.b); got != c.want {
				t.Errorf("tally = %+v, want %+v", got, c.want)
			}
		})
	}
}
