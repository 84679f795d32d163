package sched

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Refused notes that peer refused the job, and why (the stall report
// names it). The peer is not enrolled again for the job.
func (q *Queue) Refused(peer, reason string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	tr := q.trustOf(peer)
	tr.why = "refused the job: " + reason
	q.signal()
}

// SessionFailed notes that a session with peer could not start or broke,
// and why (the stall report names it).
func (q *Queue) SessionFailed(peer string, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.trustOf(peer).why = "session failed: " + errText(err)
}

// Stalled reports whether work remains, no attempt runs, and no lease
// was handed out or settled for at least after; if so, why says which
// tasks wait and what each peer the job has heard of refuses or fails
// with.
func (q *Queue) Stalled(after time.Duration) (why string, stalled bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.drainedLocked() || len(q.running) > 0 || q.remaining == q.held || q.now().Sub(q.moved) < after {
		return "", false
	}
	return q.stallReasonLocked(), true
}

// Waiting reports whether leases are held back until MinPeers peers
// enrol (the user asked to wait for them).
func (q *Queue) Waiting() bool {
	select {
	case <-q.open:
		return false
	default:
		return true
	}
}

func (q *Queue) stallReasonLocked() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no progress: %d task(s) left, none running", q.remaining)
	select {
	case <-q.open:
	default:
		fmt.Fprintf(&b, "; waiting for %d peer(s) to enrol (--min-peers), %d did", q.minPeers, len(q.peers.enrolled))
	}
	names := make([]string, 0, len(q.peers.trust)+len(q.peers.workers))
	for name := range q.peers.trust {
		names = append(names, name)
	}
	for name := range q.peers.workers {
		if q.peers.trust[name] == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var peers []string
	for _, name := range names {
		tr := q.peers.trust[name]
		switch {
		case tr != nil && tr.excluded:
			peers = append(peers, name+": excluded: "+tr.excludedWhy)
		case tr != nil && tr.why != "":
			peers = append(peers, name+": "+tr.why)
		case q.now().Sub(q.peers.workers[name]) <= VoterIdle && q.Verifying():
			why := "replicas run on distinct peers"
			if q.verify.DistinctHosts {
				why = "replicas run on distinct peers and hosts; verify: {distinct_hosts: false} lets them share a host"
			}
			peers = append(peers, name+": idle, has already voted (or a peer of its host has) on every task left ("+why+")")
		case !q.peers.workers[name].IsZero():
			peers = append(peers, fmt.Sprintf("%s: last asked for work %s ago", name, q.now().Sub(q.peers.workers[name]).Round(time.Second)))
		}
	}
	if len(peers) == 0 {
		b.WriteString("; no peer has taken part in the job")
	} else {
		b.WriteString("; peers: " + strings.Join(peers, "; "))
	}
	return b.String()
}
