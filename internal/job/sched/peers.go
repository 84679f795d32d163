package sched

import (
	"sort"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// peerState is what the queue knows of the workers: their trust
// (trust.go), when each last asked for work and last reported, where
// each is enrolled and how many slots it has.
type peerState struct {
	trust map[string]*peerTrust
	// savedStreak: the streaks of the trust file, by node ID (NodeID).
	savedStreak map[string]int
	workers     map[string]time.Time // peers that asked for work recently
	// heard is when each worker last reported a result (not a lost one).
	heard map[string]time.Time
	// enrolled: the remote peers enrolled, with their hosts ("" when the
	// job lets replicas share a host).
	enrolled map[string]string
	slots    map[string]int // by worker (batch sizing, fair shares, the tail)
	slotSum  int            // of slots
	// held: the running leases of each worker (fairShareLocked, the tail).
	held map[string]int
	// freed: closed when one of the worker's leases ends (a worker held
	// in the tail waits on it: tail.go).
	freed map[string]chan struct{}
}

func newPeerState() peerState {
	return peerState{trust: map[string]*peerTrust{}, workers: map[string]time.Time{}, heard: map[string]time.Time{},
		enrolled: map[string]string{}, slots: map[string]int{}, held: map[string]int{}, freed: map[string]chan struct{}{}}
}

// Enrol notes a remote peer's enrolment, at host (its network address
// as the coordinator reaches it; "" for none), and opens the queue once
// MinPeers have enrolled. Under verification with distinct hosts
// (spec.Verify.DistinctHosts), no two replicas of a task run on peers of
// one host.
func (q *Queue) Enrol(peer, host string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.verify.DistinctHosts {
		host = ""
	}
	q.peers.enrolled[peer] = host
	select {
	case <-q.open:
	default:
		if len(q.peers.enrolled) >= q.minPeers {
			q.log.Info("enough peers enrolled; dispatching", "peers", len(q.peers.enrolled))
			close(q.open)
		}
	}
}

// PeerReport lists the trust the coordinator holds of each peer that
// voted or was excluded.
func (q *Queue) PeerReport() []report.PeerTrust {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []report.PeerTrust
	for name, t := range q.peers.trust {
		if t.valid+t.invalid == 0 && !t.excluded {
			continue
		}
		out = append(out, report.PeerTrust{Peer: name, Valid: t.valid, Invalid: t.invalid, Excluded: t.excluded})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Peer < out[j].Peer })
	return out
}
