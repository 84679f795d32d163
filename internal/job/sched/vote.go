package sched

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/report"
)

// ballot is what the vote on one task is decided from.
type ballot struct {
	digests     []digest.ID // the votes, in arrival order
	quorum      int
	disputed    bool // two digests have been seen
	started     int  // replicas started so far
	running     int
	need        int
	maxReplicas int
	// otherVoter: an active, non-excluded worker has not voted on the
	// task and does not run it. Asked only when it matters.
	otherVoter func() bool
}

// action is what a vote decides.
type action int

const (
	wait   action = iota // more replicas are running or queued
	accept               // digest wins
	more                 // run n more replicas
	fail                 // no quorum
)

// verdict is a vote's decision.
type verdict struct {
	action   action
	digest   digest.ID // the winner (accept), or the leader
	n        int       // replicas to add (more)
	disputed bool      // the task is disputed now
}

// tally decides a task's vote.
//
// Without a dispute a digest is accepted as soon as quorum votes agree.
// Once two digests have been seen the task is disputed: replicas run (on
// distinct peers) up to max_replicas, or until no other peer can vote,
// and a digest is accepted only with at least quorum votes AND a strict
// majority of all votes; otherwise the task fails, naming the votes. So
// a minority of liars can never win a disputed task.
func tally(b ballot) verdict {
	// The votes per digest: a task has a few, counted in a small array
	// (a map per result was the vote's main cost).
	type votes struct {
		d digest.ID
		n int
	}
	var few [4]votes
	count := few[:0]
	for _, d := range b.digests {
		if i := slices.IndexFunc(count, func(c votes) bool { return c.d == d }); i >= 0 {
			count[i].n++
		} else {
			count = append(count, votes{d, 1})
		}
	}
	var best digest.ID
	bestN, total := 0, 0
	for _, c := range count {
		total += c.n
		if c.n > bestN || (c.n == bestN && bytes.Compare(c.d[:], best[:]) < 0) {
			best, bestN = c.d, c.n
		}
	}
	v := verdict{action: wait, digest: best, disputed: b.disputed || len(count) > 1}
	if !v.disputed {
		if bestN >= b.quorum {
			v.action = accept
		} else if b.running == 0 && b.need == 0 {
			v.action, v.n = more, b.quorum-bestN
		}
		return v
	}
	// Disputed: gather votes up to max_replicas from distinct peers.
	if b.started < b.maxReplicas && b.otherVoter() {
		if b.need == 0 {
			v.action, v.n = more, 1
		}
		return v
	}
	if b.running > 0 {
		return v
	}
	if bestN >= b.quorum && 2*bestN > total {
		v.action = accept
		return v
	}
	v.action = fail
	return v
}

// tallyLocked counts task's votes and accepts, escalates or fails it.
func (q *Queue) tallyLocked(task int) bool {
	ts := &q.tasks[task]
	if ts.check || ts.placing {
		return false // a trusted run decides it, or it is being placed
	}
	b := ballot{
		quorum: int(ts.quorum), disputed: ts.disputed, started: int(ts.started), running: int(ts.running), need: int(ts.need),
		maxReplicas: q.verify.MaxReplicas, otherVoter: func() bool { return q.otherVoterLocked(task) },
	}
	var few [4]digest.ID // most tasks have a vote or a few: no allocation
	b.digests = few[:0]
	for _, v := range q.votesOf(task) {
		b.digests = append(b.digests, v.digest)
	}
	v := tally(b)
	if v.disputed && !ts.disputed {
		q.disputeLocked(task)
		msg := "replicas disagree"
		if v.action == more {
			msg += "; running more"
		}
		q.log.Warn(msg, "task", q.recs.ID(task), "votes", q.voteList(task))
	}
	switch v.action {
	case accept:
		return q.acceptLocked(task, v.digest)
	case more:
		q.needLocked(task, v.n)
	case fail:
		if q.spot.fraction > 0 && q.self != "" {
			// With spot checks the submitter is the arbiter: its own run
			// decides a task the peers cannot.
			q.log.Warn("no quorum; the submitter runs the task itself", "task", q.recs.ID(task), "votes", q.voteList(task))
			q.wantCheckLocked(task)
			return false
		}
		q.failLocked(task, fmt.Errorf("no quorum (%d matching votes and a majority needed, %d votes): %s", ts.quorum, len(q.votesOf(task)), q.voteList(task)))
	}
	return false
}

// otherVoterLocked: some active, non-excluded worker has not voted on
// and does not run task.
func (q *Queue) otherVoterLocked(task int) bool {
	now := q.now()
	for peer, seen := range q.peers.workers {
		if now.Sub(seen) > VoterIdle || q.trustOf(peer).excluded {
			continue
		}
		if !q.involvedLocked(peer, task) {
			return true
		}
	}
	return false
}

// voteList says which peers voted for which digest, the digest with the
// most votes first: "digest 1b11e90a1c16 from pa, pb; digest cb6bb081bc90
// from pc". Peers are named without their node IDs (the report's votes
// keep them).
func (q *Queue) voteList(task int) string {
	return describeVotes(q.votesOf(task))
}

func describeVotes(votes []vote) string {
	var order []digest.ID
	by := map[digest.ID][]string{}
	for _, v := range votes {
		if _, ok := by[v.digest]; !ok {
			order = append(order, v.digest)
		}
		name, _ := report.SplitPeer(v.peer)
		by[v.digest] = append(by[v.digest], name)
	}
	slices.SortStableFunc(order, func(a, b digest.ID) int { return len(by[b]) - len(by[a]) })
	parts := make([]string, len(order))
	for i, d := range order {
		parts[i] = fmt.Sprintf("digest %.12s from %s", d.String(), strings.Join(by[d], ", "))
	}
	return strings.Join(parts, "; ")
}

// acceptLocked decides task for digest d: a copy of that output is to be
// placed (an Accept); once it is, acceptPlacedLocked settles the task.
// Until then the task takes no vote and no lease (taskState.placing).
func (q *Queue) acceptLocked(task int, d digest.ID) bool {
	ts := &q.tasks[task]
	var winner *vote
	for i := range q.votesOf(task) {
		if v := &q.votesOf(task)[i]; v.digest == d && v.out.held() {
			winner = v
			break
		}
	}
	if winner == nil {
		// Only digest-only replicas hold it: fetch it from one of them, off
		// the lock, then decide again.
		if !ts.fetching && !q.fetchLocked(task, d) {
			q.needLocked(task, 1)
		}
		return false
	}
	out := winner.out
	winner.out = Output{}
	ts.placing = true
	ts.need = 0
	q.unqueueLocked(task)
	q.emit(Accept{Task: task, TaskID: q.recs.ID(task), Peer: winner.peer, Digest: d, Output: out})
	return false
}

// acceptPlacedLocked decides the task of a, whose output is placed:
// updates the voters' trust, revokes other replicas.
func (q *Queue) acceptPlacedLocked(a Accept) bool {
	task, d := a.Task, a.Digest
	ts := &q.tasks[task]
	rt := q.rec(task)
	ts.settled = true
	if q.keepVotes() {
		q.m(task).accepted = d
	}
	ts.need = 0
	q.unqueueLocked(task)
	q.remaining--
	rt.Votes = reportVotes(rt.Votes[:0], q.votesOf(task))
	rt.State, rt.Peer, rt.Digest, rt.Files = report.TaskDone, a.Peer, digestString(rt.Votes, q.votesOf(task), d), report.TaskFiles(rt.ID, a.Output.Files)
	if q.Verifying() {
		rt.Verdict = fmt.Sprintf("accepted: %d of %d votes agree", countOf(q.votesOf(task), d), len(q.votesOf(task)))
		if ts.quorum == 1 && q.verify.Replicas > 1 {
			rt.Verdict += " (trusted peer, not replicated)"
		}
		q.judgeLocked(task, d)
	}
	if q.spotPickLocked(task) {
		// The result stays in place, but the task is done only when the
		// submitter's own run agrees.
		rt.State, rt.Verdict = report.TaskRunning, appendVerdict(rt.Verdict, "spot check pending")
		q.remaining++
		q.wantCheckLocked(task)
		q.revokeCopiesLocked(task)
		q.cleanVotes(task)
		return true
	}
	q.rep.Summary.Done++
	q.revokeCopiesLocked(task)
	q.cleanVotes(task)
	if !q.keepVotes() {
		delete(q.more, task) // nothing reads it again: a million tasks' worth of memory
	}
	q.emit(Done{Task: task, TaskID: rt.ID, OK: true})
	return true
}

// fetchLocked starts fetching the output with digest d from a digest-only
// voter; when it arrives (and matches d) the task is tallied again. It
// returns false if no voter can provide it.
func (q *Queue) fetchLocked(task int, d digest.ID) bool {
	ts := &q.tasks[task]
	for i := range q.votesOf(task) {
		v := q.votesOf(task)[i]
		if v.digest != d || v.fetch == nil {
			continue
		}
		ts.fetching = true
		id := q.recs.ID(task)
		q.fetches.Add(1)
		go func() {
			defer q.fetches.Done()
			stage, files, err := q.apply.Fetch(q.fetchCtx, id, d, v.fetch)
			q.mu.Lock()
			q.repMu.Lock()
			ts.fetching = false
			gone := err != nil || ts.settled || q.closed
			for j := range q.votesOf(task) {
				w := &q.votesOf(task)[j]
				if w.peer != v.peer {
					continue
				}
				if gone {
					w.fetch = nil
				} else {
					w.out = Output{Stage: stage, Files: files}
				}
			}
			if gone {
				if stage != "" {
					q.emit(Discard{Stage: stage})
				}
				if err != nil {
					q.log.Warn("fetch accepted output", "task", id, "peer", v.peer, "err", err)
				}
			}
			if !ts.settled && !q.closed {
				q.tallyLocked(task)
			}
			q.repMu.Unlock()
			q.signal()
			q.unlock(-1)
		}()
		return true
	}
	return false
}

// keepVotes: a decided task's votes and accepted digest are read again
// (a verified job's trust, spot checks); otherwise they are dropped.
func (q *Queue) keepVotes() bool { return q.Verifying() || q.spot.fraction > 0 }

func countOf(vs []vote, d digest.ID) int {
	n := 0
	for _, v := range vs {
		if v.digest == d {
			n++
		}
	}
	return n
}

// reportVotes appends the votes as report.json gives them (hex digests).
func reportVotes(out []report.Vote, vs []vote) []report.Vote {
	var last digest.ID
	s := ""
	for _, v := range vs {
		if s == "" || v.digest != last {
			last, s = v.digest, v.digest.String() // votes that agree share it
		}
		out = append(out, report.Vote{Peer: v.peer, Digest: s})
	}
	return out
}

// digestString is d as text, shared with a report vote (rvs, made from
// vs by reportVotes) for it: a task's digest is then one string.
func digestString(rvs []report.Vote, vs []vote, d digest.ID) string {
	for i, v := range vs {
		if v.digest == d && i < len(rvs) {
			return rvs[i].Digest
		}
	}
	return d.String()
}
