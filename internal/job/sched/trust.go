package sched

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

// peerTrust is what the coordinator knows of a peer's answers.
type peerTrust struct {
	valid, invalid int
	streak         int // consecutive valid results
	excluded       bool
	// losses counts lost attempts since the last valid result; malformed
	// counts malformed results (Fault).
	losses, malformed int
	// why is the peer's latest fault or refusal, and excludedWhy the
	// reason it was excluded (for the stall report).
	why, excludedWhy string
	// lostTo holds, for each task on which the peer lost its vote, the
	// peers whose digest won; outvoted: it was excluded for lost votes.
	// A spot check that catches a winner forgives those losses.
	lostTo   map[int][]string
	outvoted bool
}

// chargeLocked gives peer a strike of kind f for err, and excludes it at
// the job's strike limit.
func (q *Queue) chargeLocked(peer string, f Fault, err error) {
	tr := q.trustOf(peer)
	switch f {
	case FaultLost:
		tr.losses++
		tr.why = "lost an attempt: " + errText(err)
		if tr.losses >= q.strikes && !tr.excluded {
			q.excludeLocked(peer, fmt.Sprintf("lost %d attempts in a row (last: %s)", tr.losses, errText(err)), false)
		}
	case FaultMalformed:
		tr.malformed++
		tr.why = "sent a malformed result: " + errText(err)
		if tr.malformed >= q.strikes && !tr.excluded {
			q.excludeLocked(peer, fmt.Sprintf("sent %d malformed results (last: %s)", tr.malformed, errText(err)), false)
		}
	}
}

// Forged charges peer with a malformed result that answers no lease the
// peer holds (one it never held, or one already settled): a strike, and
// exclusion at the job's strike limit, as any malformed result. It
// reports whether the peer is now excluded.
func (q *Queue) Forged(peer string, err error) bool {
	q.mu.Lock()
	q.repMu.Lock()
	q.chargeLocked(peer, FaultMalformed, err)
	q.repMu.Unlock()
	q.signal()
	excluded := q.trustOf(peer).excluded
	q.unlock(-1)
	return excluded
}

func (q *Queue) trustOf(peer string) *peerTrust {
	t := q.peers.trust[peer]
	if t == nil {
		t = &peerTrust{streak: q.peers.savedStreak[NodeID(peer)]}
		q.peers.trust[peer] = t
	}
	return t
}

// judgeLocked updates the trust of task's voters against the accepted
// digest, and excludes peers that lost too many votes.
func (q *Queue) judgeLocked(task int, d digest.ID) {
	var winners []string
	for _, v := range q.votesOf(task) {
		if v.digest == d {
			winners = append(winners, v.peer)
		}
	}
	for _, v := range q.votesOf(task) {
		tr := q.trustOf(v.peer)
		if v.digest == d {
			tr.valid++
			tr.streak++
			continue
		}
		tr.invalid++
		tr.streak = 0
		if tr.lostTo == nil {
			tr.lostTo = map[int][]string{}
		}
		tr.lostTo[task] = winners
		if tr.invalid >= ExcludeAfter && !tr.excluded {
			tr.outvoted = true
			q.excludeLocked(v.peer, fmt.Sprintf("lost %d votes", tr.invalid), true)
		}
	}
}

// forgiveLocked takes back the lost votes that liars (caught by a spot
// check) won, and reinstates a peer excluded for lost votes that no
// longer has enough of them: an honest minority outvoted by colluders is
// not to blame. It returns the peers reinstated.
func (q *Queue) forgiveLocked(liars []string) []string {
	var back []string
	for name, tr := range q.peers.trust {
		for t, winners := range tr.lostTo {
			if slices.ContainsFunc(winners, func(w string) bool { return slices.Contains(liars, w) }) {
				delete(tr.lostTo, t)
				tr.invalid--
			}
		}
		if tr.excluded && tr.outvoted && tr.invalid < ExcludeAfter && !slices.Contains(liars, name) {
			tr.excluded, tr.outvoted, tr.excludedWhy = false, false, ""
			q.rep.Excluded = slices.DeleteFunc(q.rep.Excluded, func(e report.Exclusion) bool { return e.Peer == name })
			q.emit(Reinstate{Peer: name})
			q.log.Warn("peer reinstated: the votes it lost were won by peers a spot check caught", "peer", name)
			back = append(back, name)
		}
	}
	slices.Sort(back)
	return back
}

// excludeLocked stops giving peer work, takes back its leases and, if
// distrust (the peer gave wrong or malformed answers, not only lost
// ones), re-verifies every task whose accepted result peer voted for: a
// colluding peer's agreement is worth nothing once it is known to lie.
func (q *Queue) excludeLocked(peer, why string, distrust bool) {
	tr := q.trustOf(peer)
	tr.excluded, tr.excludedWhy = true, why
	ex := report.Exclusion{Peer: peer, Reason: why, Time: q.now().UTC()}
	q.rep.Excluded = append(q.rep.Excluded, ex)
	q.emit(Exclude{Peer: peer, Reason: why, Time: ex.Time})
	q.log.Warn("peer excluded from the job", "peer", peer, "reason", why)
	for _, l := range q.running {
		if l.Peer != peer {
			continue
		}
		q.revokeLocked(l)
		l.settled = true
		q.unrunLocked(l)
		q.dropCopyLocked(l.Task)
		q.cancelLocked(l, "peer excluded")
		q.needFrontLocked(l.Task, 1)
	}
	if !distrust {
		return
	}
	// Only tasks with votes can hold one of peer's: those in more, in
	// task order (the order they are reopened in).
	voted := slices.Sorted(maps.Keys(q.more))
	for _, t := range voted {
		ts := &q.tasks[t]
		keep := q.votesOf(t)[:0]
		hit := false
		for _, v := range q.votesOf(t) {
			if v.peer == peer {
				hit = true
				continue
			}
			keep = append(keep, v)
		}
		q.m(t).votes = keep
		if !hit || !ts.settled || ts.check || ts.trusted {
			continue // not decided, or a trusted run decides or decided it
		}
		rt := q.rec(t)
		if countOf(q.votesOf(t), q.accepted(t)) >= int(ts.quorum) && q.verify.Replicas > 1 && ts.quorum > 1 {
			continue // still carried by a quorum of others
		}
		if q.spot.fraction > 0 && q.self != "" {
			// Spot checks are on: the submitter's own run decides it.
			q.log.Warn("re-verifying on this machine a task an excluded peer voted for", "task", rt.ID, "peer", peer)
			q.remaining++
			q.rep.Summary.Done--
			rt.State, rt.Verdict = report.TaskPending, "re-verifying on the submitter: "+peer+" was excluded"
			q.emit(Retry{Task: t, TaskID: rt.ID, Outcome: OutcomeReopened, Err: fmt.Errorf("re-verifying on the submitter: %s was excluded", peer)})
			q.wantCheckLocked(t)
			continue
		}
		// Reopen: run replicas on other peers until a quorum forms again.
		q.log.Warn("re-verifying a task an excluded peer voted for", "task", rt.ID, "peer", peer)
		ts.settled = false
		q.disputeLocked(t)
		ts.quorum = int32(max(q.verify.Quorum, 1))
		q.remaining++
		q.rep.Summary.Done--
		rt.State, rt.Verdict = report.TaskPending, "re-verifying: "+peer+" was excluded"
		q.emit(Retry{Task: t, TaskID: rt.ID, Outcome: OutcomeReopened, Err: fmt.Errorf("re-verifying: %s was excluded", peer)})
		q.needLocked(t, max(int(ts.quorum)-countOf(q.votesOf(t), q.accepted(t)), 1))
	}
}

// savedTrust is a peer's record in the trust file, by node ID (NodeID):
// adaptive replication remembers, across jobs, how many valid results in
// a row each peer gave (BOINC keeps host reliability the same way).
// Exclusions are per job.
type savedTrust struct {
	Streak  int       `json:"streak"`
	Valid   int       `json:"valid"`
	Invalid int       `json:"invalid"`
	Updated time.Time `json:"updated"`
}

// NodeID is the node ID of a worker named "name@id" (a remote peer, as
// the coordinator names it), or the name itself.
func NodeID(worker string) string {
	if i := strings.LastIndexByte(worker, '@'); i >= 0 {
		return worker[i+1:]
	}
	return worker
}

func (q *Queue) loadTrust() {
	path := q.trustFile
	if path == "" {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var saved map[string]savedTrust
	if err := json.Unmarshal(data, &saved); err != nil {
		q.log.Warn("ignoring unreadable trust file", "path", path, "err", err)
		return
	}
	q.peers.savedStreak = map[string]int{}
	for peer, s := range saved {
		q.peers.savedStreak[NodeID(peer)] = s.Streak
	}
}

// SaveTrust writes the peers' streaks back to the trust file (atomically)
// under adaptive trust; a failure is logged, the job goes on.
func (q *Queue) SaveTrust() {
	path := q.trustFile
	if path == "" || q.verify.Trust != spec.TrustAdaptive {
		return
	}
	saved := map[string]savedTrust{}
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &saved); err != nil {
			q.log.Warn("rewriting unreadable trust file", "path", path, "err", err)
		}
	}
	for k, s := range saved { // a file keyed by "name@ID": by ID from now on
		if id := NodeID(k); id != k {
			delete(saved, k)
			if _, ok := saved[id]; !ok {
				saved[id] = s
			}
		}
	}
	q.mu.Lock()
	now := q.now().UTC()
	for worker, t := range q.peers.trust {
		if t.valid+t.invalid == 0 && !t.excluded {
			continue // no result in this job: its record is as it was
		}
		peer := NodeID(worker)
		s := saved[peer]
		s.Streak, s.Valid, s.Invalid, s.Updated = t.streak, s.Valid+t.valid, s.Invalid+t.invalid, now
		if t.excluded {
			s.Streak = 0
		}
		saved[peer] = s
	}
	q.mu.Unlock()
	data, _ := json.MarshalIndent(saved, "", "  ")
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = report.WriteFileAtomic(path, append(data, '\n'), 0o644)
	}
	if err != nil {
		q.log.Warn("save trust file", "path", path, "err", err)
	}
}
