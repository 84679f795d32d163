package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

// errDrained: no task is left to lease; the worker should stop.
var errDrained = errors.New("no tasks left")

// errExcluded: the peer lost too many votes and takes no more work.
var errExcluded = fmt.Errorf("%w: excluded after losing votes", ErrRefused)

// OutcomeReopened is the Events.TaskRetry outcome of a task that was
// accepted and is verified again, because a peer that voted for it was
// excluded: it is no longer done.
const OutcomeReopened = "reopened"

// lease is one attempt (one replica) of a task handed to one worker.
type lease struct {
	id      uint64
	task    int // index into the spec's tasks
	taskID  string
	attempt int
	peer    string
	start   time.Time
	// digestOnly: another replica uploads the output; this one reports
	// its digest (the peer keeps the files, fetched only if needed).
	digestOnly bool
	// revoked is closed when the lease is taken back (the task was
	// decided, the lease timed out, or the run ends: the worker should
	// stop the attempt) and when it is settled (so that nothing waits on
	// a finished lease).
	revoked chan struct{}
	settled bool
	// Guarded by the job's vcState: messages this attempt has received,
	// and whether it resumed from a checkpoint.
	consumed uint64
	resumed  bool
	pos      int // position in the task's op log
}

// vote is a replica's successful result.
type vote struct {
	peer   string
	digest string
	// stage holds the output, if this replica uploaded it; fetch gets it
	// into a folder otherwise.
	stage string
	files []string
	fetch func(ctx context.Context, dir string) error
}

// taskState is the scheduling and voting state of one task.
type taskState struct {
	need     int // replicas still to start
	running  int
	started  int // replicas started, failed ones included
	failures int // replicas that failed (task error, crash, timeout)
	quorum   int // matching votes needed (1 when adaptive trust skips replication)
	disputed bool
	settled  bool
	fetching bool // an accepted output is being fetched
	votes    []vote
}

// peerTrust is what the coordinator knows of a peer's answers.
type peerTrust struct {
	valid, invalid int
	streak         int // consecutive valid results
	excluded       bool
}

// Trust thresholds.
const (
	// trustedStreak valid results in a row make a peer trusted under
	// adaptive replication.
	trustedStreak = 10
	// excludeAfter lost votes exclude a peer from the job.
	excludeAfter = 3
)

// queue hands out leases, takes results, votes and decides retries. It is
// the scheduling heart of a job: workers (local slots, remote peers) pull
// leases from it, so fast workers take more work and nobody is flooded.
type queue struct {
	r      *runner
	verify spec.Verify
	rnd    *rand.Rand

	mu        sync.Mutex
	wake      chan struct{} // closed and replaced when something changes
	pending   []int         // tasks with need > 0, in order
	tasks     []taskState
	running   map[uint64]*lease
	trust     map[string]*peerTrust
	workers   map[string]time.Time // peers that asked for work recently
	remaining int
	failed    int
	nextID    uint64
	durations []time.Duration // of successful attempts, for backup decisions
	median    time.Duration   // of durations[:medianOf]
	medianOf  int
	closed    bool
	// open is closed once MinPeers peers have enrolled; leases wait for it.
	open     chan struct{}
	enrolled map[string]bool
}

func newQueue(r *runner, pending []int) *queue {
	v := r.p.Spec.Verify
	if v.Replicas < 1 {
		v.Replicas = 1
	}
	if v.Quorum < 1 || v.Quorum > v.Replicas {
		v.Quorum = v.Replicas
	}
	if v.MaxReplicas < v.Replicas {
		v.MaxReplicas = v.Replicas
	}
	if v.Replicas > 1 && (r.opts.Remote == nil || r.opts.Remote.Swarm == nil) {
		// Replicas must run on distinct peers; alone there are none to
		// compare with, so results are taken as they are, and the
		// report says so.
		r.log.Warn("verify: no peers to run replicas on; results are not verified", "replicas", v.Replicas)
		r.rep.Warnings = append(r.rep.Warnings, fmt.Sprintf("verify asked for %d replicas, but the job ran on this machine alone: results are not verified", v.Replicas))
		v.Replicas, v.Quorum, v.MaxReplicas = 1, 1, 1
	}
	h := fnv.New64a()
	h.Write([]byte(r.p.ID))
	q := &queue{
		r:         r,
		verify:    v,
		rnd:       rand.New(rand.NewPCG(h.Sum64(), 0x9e3779b97f4a7c15)),
		wake:      make(chan struct{}),
		pending:   pending,
		tasks:     make([]taskState, len(r.p.Spec.Tasks)),
		running:   map[uint64]*lease{},
		trust:     map[string]*peerTrust{},
		workers:   map[string]time.Time{},
		remaining: len(pending),
		open:      make(chan struct{}),
		enrolled:  map[string]bool{},
	}
	if r.opts.MinPeers <= 0 {
		close(q.open)
	}
	for _, t := range pending {
		q.tasks[t] = taskState{need: v.Replicas, quorum: v.Quorum}
	}
	if v.Trust == spec.TrustAdaptive {
		q.loadTrust()
	}
	return q
}

// savedTrust is a peer's record in the trust file: adaptive replication
// remembers, across jobs, how many valid results in a row each peer gave
// (BOINC keeps host reliability the same way). Exclusions are per job.
type savedTrust struct {
	Streak  int       `json:"streak"`
	Valid   int       `json:"valid"`
	Invalid int       `json:"invalid"`
	Updated time.Time `json:"updated"`
}

func (q *queue) loadTrust() {
	path := q.r.opts.TrustFile
	if path == "" {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var saved map[string]savedTrust
	if err := json.Unmarshal(data, &saved); err != nil {
		q.r.log.Warn("ignoring unreadable trust file", "path", path, "err", err)
		return
	}
	for peer, s := range saved {
		q.trust[peer] = &peerTrust{streak: s.Streak}
	}
}

// saveTrust writes the peers' streaks back (atomically).
func (q *queue) saveTrust() {
	path := q.r.opts.TrustFile
	if path == "" || q.verify.Trust != spec.TrustAdaptive {
		return
	}
	saved := map[string]savedTrust{}
	if data, err := os.ReadFile(path); err == nil {
		json.Unmarshal(data, &saved)
	}
	q.mu.Lock()
	for peer, t := range q.trust {
		s := saved[peer]
		s.Streak, s.Valid, s.Invalid, s.Updated = t.streak, s.Valid+t.valid, s.Invalid+t.invalid, time.Now().UTC()
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
		q.r.log.Warn("save trust file", "path", path, "err", err)
	}
}

func (q *queue) verifying() bool { return q.verify.Replicas > 1 || q.r.verifier }

func (q *queue) signal() {
	close(q.wake)
	q.wake = make(chan struct{})
}

func (q *queue) drainedLocked() bool { return q.remaining == 0 || q.closed }

func (q *queue) trustOf(peer string) *peerTrust {
	t := q.trust[peer]
	if t == nil {
		t = &peerTrust{}
		q.trust[peer] = t
	}
	return t
}

// next blocks until a task can be leased to peer and returns the lease,
// or errDrained when the job has nothing left, errExcluded when the peer
// may not work for the job any more, or ctx's error.
func (q *queue) next(ctx context.Context, peer string) (*lease, error) {
	select {
	case <-q.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		q.mu.Lock()
		if q.drainedLocked() {
			q.mu.Unlock()
			return nil, errDrained
		}
		if q.trustOf(peer).excluded {
			q.mu.Unlock()
			return nil, errExcluded
		}
		q.workers[peer] = time.Now()
		if l := q.takeLocked(peer); l != nil {
			q.mu.Unlock()
			return l, nil
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		case <-time.After(250 * time.Millisecond): // re-check backup candidates
		}
	}
}

// tryNext returns a lease for peer if one can be had right now, without
// waiting; nil otherwise.
func (q *queue) tryNext(peer string) *lease {
	select {
	case <-q.open:
	default:
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.drainedLocked() || q.trustOf(peer).excluded {
		return nil
	}
	return q.takeLocked(peer)
}

func (q *queue) takeLocked(peer string) *lease {
	for i, t := range q.pending {
		if q.involvedLocked(peer, t) {
			continue
		}
		ts := &q.tasks[t]
		first := ts.started == 0
		ts.need--
		if ts.need <= 0 {
			q.pending = slices.Delete(q.pending, i, i+1)
		}
		if first && q.verify.Trust == spec.TrustAdaptive && q.verify.Replicas > 1 {
			// Adaptive replication (BOINC): a trusted peer's result is
			// replicated only with probability 1/streak.
			if tr := q.trustOf(peer); tr.streak >= trustedStreak && q.rnd.Float64() >= 1/float64(tr.streak) {
				ts.quorum = 1
				if ts.need > 0 {
					ts.need = 0
					q.pending = slices.DeleteFunc(q.pending, func(x int) bool { return x == t })
				}
			}
		}
		return q.leaseLocked(t, peer, !first && q.verifying())
	}
	if len(q.pending) > 0 {
		return nil
	}
	// Nothing pending: near the end of the job an idle worker may run a
	// backup copy of the slowest running task (first valid result wins).
	if !q.verifying() {
		if t, ok := q.backupCandidateLocked(peer); ok {
			return q.leaseLocked(t, peer, false)
		}
	}
	return nil
}

// involvedLocked: peer runs a replica of task, or already voted on it.
// Replicas of a task go to distinct peers.
func (q *queue) involvedLocked(peer string, task int) bool {
	for _, l := range q.running {
		if l.task == task && l.peer == peer {
			return true
		}
	}
	if q.verifying() {
		for _, v := range q.tasks[task].votes {
			if v.peer == peer {
				return true
			}
		}
	}
	return false
}

// backupCandidateLocked picks the running task that has run longest, if
// it has only one copy, is not held by peer, and has run for more than
// twice the median successful attempt (and at least a second).
func (q *queue) backupCandidateLocked(peer string) (int, bool) {
	if len(q.durations) == 0 || len(q.running) == 0 {
		return 0, false
	}
	// The median is recomputed when the sample grew by an eighth since it
	// was last taken: idle workers ask often near the end of a job.
	if n := len(q.durations); q.medianOf == 0 || n >= q.medianOf+max(1, q.medianOf/8) {
		d := slices.Clone(q.durations)
		slices.Sort(d)
		q.median, q.medianOf = d[n/2], n
	}
	threshold := max(2*q.median, time.Second)
	var best *lease
	for _, l := range q.running {
		if q.tasks[l.task].running != 1 || l.peer == peer || time.Since(l.start) < threshold {
			continue
		}
		if best == nil || l.start.Before(best.start) {
			best = l
		}
	}
	if best == nil {
		return 0, false
	}
	return best.task, true
}

func (q *queue) leaseLocked(task int, peer string, digestOnly bool) *lease {
	q.nextID++
	ts := &q.tasks[task]
	r := q.r
	r.mu.Lock()
	rt := &r.rep.Tasks[task]
	attempt := len(rt.Attempts) + ts.running
	rt.State = report.TaskRunning
	r.mu.Unlock()
	l := &lease{
		id:         q.nextID,
		task:       task,
		taskID:     rt.ID,
		attempt:    attempt,
		peer:       peer,
		start:      time.Now().UTC(),
		digestOnly: digestOnly,
		revoked:    make(chan struct{}),
	}
	q.running[l.id] = l
	ts.running++
	ts.started++
	return l
}

// result is what a worker reports for a lease.
type result struct {
	outcome string
	err     error
	// stage is a folder holding the complete output (outcome ok, unless
	// digest-only); it is renamed into place if this copy wins, removed
	// otherwise. fetch gets the output of a digest-only replica.
	stage  string
	files  []string
	fetch  func(ctx context.Context, dir string) error
	digest string
	end    time.Time
}

// finish settles a lease: records the attempt, counts the vote, and
// decides the task when it can. It returns whether the task was accepted
// with this result. It takes over res.stage: the folder is kept with the
// vote, placed if the vote wins, removed otherwise.
func (q *queue) finish(l *lease, res result) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	kept := false
	defer func() {
		if !kept && res.stage != "" {
			os.RemoveAll(res.stage)
		}
	}()
	if l.settled {
		return false
	}
	l.settled = true
	revoke(l) // the attempt is over: whatever waits on it may stop
	delete(q.running, l.id)
	ts := &q.tasks[l.task]
	ts.running--
	defer q.signal()

	r := q.r
	if res.end.IsZero() {
		res.end = time.Now().UTC()
	}
	att := report.Attempt{Peer: l.peer, Start: l.start, End: res.end, Outcome: res.outcome, Resumed: r.vc.wasResumed(l)}
	if res.err != nil {
		att.Error = res.err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := &r.rep.Tasks[l.task]
	r.dirty = true
	if ts.settled {
		if res.outcome != report.OutcomeOK {
			att.Outcome = report.OutcomeCanceled
		}
		rt.Attempts = append(rt.Attempts, att)
		return false
	}
	rt.Attempts = append(rt.Attempts, att)
	switch res.outcome {
	case report.OutcomeOK:
		if q.trustOf(l.peer).excluded {
			rt.Attempts[len(rt.Attempts)-1].Error = "peer excluded: vote ignored"
			q.needLocked(l.task, 1)
			return false
		}
		ts.votes = append(ts.votes, vote{peer: l.peer, digest: res.digest, stage: res.stage, files: res.files, fetch: res.fetch})
		kept = true
		q.durations = append(q.durations, res.end.Sub(l.start))
		return q.tallyLocked(l.task)
	case report.OutcomeRejected:
		// The plugin's check rejected the output: a lost vote.
		tr := q.trustOf(l.peer)
		tr.invalid++
		tr.streak = 0
		if tr.invalid >= excludeAfter && !tr.excluded {
			q.excludeLocked(l.peer, fmt.Sprintf("%d outputs rejected by the plugin's check", tr.invalid))
		}
		if ts.started >= q.verify.MaxReplicas+r.p.Spec.Retries {
			if ts.running == 0 {
				q.failLocked(l.task, fmt.Errorf("every output was rejected by the plugin's check (%d tries)", ts.started))
			}
			return false
		}
		q.needLocked(l.task, 1)
		return false
	case report.OutcomeCanceled, report.OutcomeLost:
		q.needLocked(l.task, 1)
		if res.outcome == report.OutcomeLost {
			r.log.Info("lease lost, task requeued", "task", l.taskID, "peer", l.peer, "err", res.err)
		}
		return false
	default:
		ts.failures++
		if ts.failures <= r.p.Spec.Retries {
			r.log.Info("task attempt failed, retrying", "task", l.taskID, "peer", l.peer, "outcome", res.outcome, "err", res.err)
			r.opts.Events.TaskRetry(l.taskID, res.outcome, res.err)
			q.needLocked(l.task, 1)
			return false
		}
		if ts.running > 0 || ts.need > 0 {
			return false // other replicas may still decide it
		}
		if len(ts.votes) > 0 {
			return q.tallyLocked(l.task)
		}
		q.failLocked(l.task, res.err)
		return false
	}
}

// needLocked asks for n more replicas of task.
func (q *queue) needLocked(task, n int) {
	ts := &q.tasks[task]
	if ts.settled {
		return
	}
	ts.need += n
	if !slices.Contains(q.pending, task) {
		q.pending = append(q.pending, task)
	}
	q.r.rep.Tasks[task].State = report.TaskPending
}

// tallyLocked counts task's votes and accepts, escalates or fails it.
//
// Without a dispute a digest is accepted as soon as quorum votes agree.
// Once two digests have been seen the task is disputed: replicas run (on
// distinct peers) up to max_replicas, or until no other peer can vote,
// and a digest is accepted only with at least quorum votes AND a strict
// majority of all votes; otherwise the task fails, naming the votes. So
// a minority of liars can never win a disputed task.
func (q *queue) tallyLocked(task int) bool {
	ts := &q.tasks[task]
	count := map[string]int{}
	for _, v := range ts.votes {
		count[v.digest]++
	}
	best, bestN, total := "", 0, 0
	for d, n := range count {
		total += n
		if n > bestN || (n == bestN && d < best) {
			best, bestN = d, n
		}
	}
	if len(count) > 1 && !ts.disputed {
		ts.disputed = true
		q.r.log.Warn("replicas disagree; running more", "task", q.r.rep.Tasks[task].ID, "votes", q.voteList(task))
	}
	if !ts.disputed {
		if bestN >= ts.quorum {
			return q.acceptLocked(task, best)
		}
		if ts.running == 0 && ts.need == 0 {
			q.needLocked(task, ts.quorum-bestN)
		}
		return false
	}
	// Disputed: gather votes up to max_replicas from distinct peers.
	if ts.started < q.verify.MaxReplicas && q.otherVoterLocked(task) {
		if ts.need == 0 && ts.running == 0 {
			q.needLocked(task, 1)
		} else if ts.need == 0 && ts.started+ts.need < q.verify.MaxReplicas {
			q.needLocked(task, 1)
		}
		return false
	}
	if ts.running > 0 {
		return false
	}
	if bestN >= ts.quorum && 2*bestN > total {
		return q.acceptLocked(task, best)
	}
	q.failLocked(task, fmt.Errorf("no quorum: %s", q.voteList(task)))
	return false
}

// otherVoterLocked: some active, non-excluded worker has not voted on
// and does not run task.
func (q *queue) otherVoterLocked(task int) bool {
	for peer, seen := range q.workers {
		if time.Since(seen) > 30*time.Second || q.trustOf(peer).excluded {
			continue
		}
		if !q.involvedLocked(peer, task) {
			return true
		}
	}
	return false
}

func (q *queue) voteList(task int) string {
	var parts []string
	for _, v := range q.tasks[task].votes {
		parts = append(parts, fmt.Sprintf("%s=%.12s", v.peer, v.digest))
	}
	return strings.Join(parts, ", ")
}

// acceptLocked decides task for digest: places a copy of that output,
// updates the voters' trust, revokes other replicas.
func (q *queue) acceptLocked(task int, digest string) bool {
	ts := &q.tasks[task]
	r := q.r
	rt := &r.rep.Tasks[task]
	var winner *vote
	for i := range ts.votes {
		if v := &ts.votes[i]; v.digest == digest && v.stage != "" {
			winner = v
			break
		}
	}
	if winner == nil {
		// Only digest-only replicas hold it: fetch it from one of them, off
		// the lock, then decide again.
		if !ts.fetching && !q.fetchLocked(task, digest) {
			q.needLocked(task, 1)
		}
		return false
	}
	if err := r.place(rt.ID, winner.stage); err != nil {
		r.log.Warn("place output", "task", rt.ID, "err", err)
		q.needLocked(task, 1)
		return false
	}
	winner.stage = ""
	ts.settled = true
	ts.need = 0
	q.pending = slices.DeleteFunc(q.pending, func(x int) bool { return x == task })
	q.remaining--
	rt.State, rt.Peer, rt.Digest, rt.Files = report.TaskDone, winner.peer, digest, relFiles(rt.ID, winner.files)
	rt.Votes = rt.Votes[:0]
	for _, v := range ts.votes {
		rt.Votes = append(rt.Votes, report.Vote{Peer: v.peer, Digest: v.digest})
	}
	if q.verifying() {
		rt.Verdict = fmt.Sprintf("accepted: %d of %d votes agree", countOf(ts.votes, digest), len(ts.votes))
		if ts.quorum == 1 && q.verify.Replicas > 1 {
			rt.Verdict += " (trusted peer, not replicated)"
		}
		q.judgeLocked(task, digest)
	}
	r.rep.Summary.Done++
	q.revokeCopiesLocked(task)
	q.cleanVotes(task)
	r.opts.Events.TaskDone(rt.ID, true)
	return true
}

// fetchLocked starts fetching the output with digest from a digest-only
// voter; when it arrives (and matches the digest) the task is tallied
// again. It returns false if no voter can provide it.
func (q *queue) fetchLocked(task int, digest string) bool {
	ts := &q.tasks[task]
	r := q.r
	for i := range ts.votes {
		v := ts.votes[i]
		if v.digest != digest || v.fetch == nil {
			continue
		}
		ts.fetching = true
		id := r.rep.Tasks[task].ID
		go func() {
			dir, err := os.MkdirTemp(r.workRoot, id+".fetch-*")
			if err == nil {
				if err = v.fetch(context.Background(), dir); err == nil {
					var got string
					var files []string
					if got, files, err = outputs.Digest(dir); err == nil && got != digest {
						err = fmt.Errorf("fetched output hashes to %.12s, not %.12s", got, digest)
					}
					v.files = files
				}
			}
			q.mu.Lock()
			defer q.mu.Unlock()
			r.mu.Lock()
			defer r.mu.Unlock()
			ts.fetching = false
			for j := range ts.votes {
				w := &ts.votes[j]
				if w.peer != v.peer {
					continue
				}
				if err != nil || ts.settled || q.closed {
					w.fetch = nil
				} else {
					w.stage, w.files = dir, v.files
				}
			}
			if err != nil || ts.settled || q.closed {
				os.RemoveAll(dir)
				if err != nil {
					r.log.Warn("fetch accepted output", "task", id, "peer", v.peer, "err", err)
				}
			}
			if !ts.settled && !q.closed {
				q.tallyLocked(task)
			}
			q.signal()
		}()
		return true
	}
	return false
}

func countOf(vs []vote, digest string) int {
	n := 0
	for _, v := range vs {
		if v.digest == digest {
			n++
		}
	}
	return n
}

// judgeLocked updates the trust of task's voters against the accepted
// digest, and excludes peers that lost too many votes.
func (q *queue) judgeLocked(task int, digest string) {
	for _, v := range q.tasks[task].votes {
		tr := q.trustOf(v.peer)
		if v.digest == digest {
			tr.valid++
			tr.streak++
			continue
		}
		tr.invalid++
		tr.streak = 0
		if tr.invalid >= excludeAfter && !tr.excluded {
			q.excludeLocked(v.peer, fmt.Sprintf("lost %d votes", tr.invalid))
		}
	}
}

// excludeLocked stops giving peer work and re-verifies every task whose
// accepted result peer voted for: a colluding peer's agreement is worth
// nothing once it is known to lie.
func (q *queue) excludeLocked(peer, why string) {
	tr := q.trustOf(peer)
	tr.excluded = true
	r := q.r
	r.rep.Excluded = append(r.rep.Excluded, report.Exclusion{Peer: peer, Reason: why, Time: time.Now().UTC()})
	r.log.Warn("peer excluded from the job", "peer", peer, "reason", why)
	for _, l := range q.running {
		if l.peer != peer {
			continue
		}
		revoke(l)
		l.settled = true
		delete(q.running, l.id)
		q.tasks[l.task].running--
		r.rep.Tasks[l.task].Attempts = append(r.rep.Tasks[l.task].Attempts, report.Attempt{
			Peer: l.peer, Start: l.start, End: time.Now().UTC(), Outcome: report.OutcomeCanceled, Error: "peer excluded",
		})
		q.needLocked(l.task, 1)
	}
	for t := range q.tasks {
		ts := &q.tasks[t]
		keep := ts.votes[:0]
		hit := false
		for _, v := range ts.votes {
			if v.peer == peer {
				hit = true
				continue
			}
			keep = append(keep, v)
		}
		ts.votes = keep
		if !hit || !ts.settled {
			continue
		}
		rt := &r.rep.Tasks[t]
		if countOf(ts.votes, rt.Digest) >= ts.quorum && q.verify.Replicas > 1 && ts.quorum > 1 {
			continue // still carried by a quorum of others
		}
		// Reopen: run replicas on other peers until a quorum forms again.
		r.log.Warn("re-verifying a task an excluded peer voted for", "task", rt.ID, "peer", peer)
		ts.settled, ts.disputed = false, true
		ts.quorum = max(q.verify.Quorum, 1)
		q.remaining++
		r.rep.Summary.Done--
		rt.State, rt.Verdict = report.TaskPending, "re-verifying: "+peer+" was excluded"
		r.opts.Events.TaskRetry(rt.ID, OutcomeReopened, fmt.Errorf("re-verifying: %s was excluded", peer))
		q.needLocked(t, max(ts.quorum-countOf(ts.votes, rt.Digest), 1))
	}
}

func (q *queue) failLocked(task int, err error) {
	ts := &q.tasks[task]
	r := q.r
	rt := &r.rep.Tasks[task]
	ts.settled = true
	ts.need = 0
	q.pending = slices.DeleteFunc(q.pending, func(x int) bool { return x == task })
	q.remaining--
	q.failed++
	rt.State = report.TaskFailed
	rt.Votes = rt.Votes[:0]
	for _, v := range ts.votes {
		rt.Votes = append(rt.Votes, report.Vote{Peer: v.peer, Digest: v.digest})
	}
	if q.verifying() {
		rt.Verdict = "failed: " + err.Error()
	}
	r.rep.Summary.Failed++
	r.log.Warn("task failed", "task", rt.ID, "attempts", len(rt.Attempts), "err", err)
	r.opts.Events.TaskDone(rt.ID, false)
	q.revokeCopiesLocked(task)
	q.cleanVotes(task)
}

// cleanVotes removes staged outputs that lost.
func (q *queue) cleanVotes(task int) {
	for i := range q.tasks[task].votes {
		if s := q.tasks[task].votes[i].stage; s != "" {
			os.RemoveAll(s)
			q.tasks[task].votes[i].stage = ""
		}
	}
}

func (q *queue) revokeCopiesLocked(task int) {
	for _, l := range q.running {
		if l.task == task {
			close(l.revoked)
			delete(q.running, l.id)
			q.tasks[task].running--
			l.settled = true
			q.r.rep.Tasks[task].Attempts = append(q.r.rep.Tasks[task].Attempts, report.Attempt{
				Peer: l.peer, Start: l.start, End: time.Now().UTC(), Outcome: report.OutcomeCanceled, Error: "the task was decided without it",
			})
		}
	}
}

// lose settles every running lease of peer as lost (the peer went away)
// and requeues their tasks at once.
func (q *queue) lose(peer string, why error) int {
	q.mu.Lock()
	var ls []*lease
	for _, l := range q.running {
		if l.peer == peer {
			ls = append(ls, l)
		}
	}
	q.mu.Unlock()
	for _, l := range ls {
		revoke(l)
		q.finish(l, result{outcome: report.OutcomeLost, err: why})
	}
	return len(ls)
}

func revoke(l *lease) {
	select {
	case <-l.revoked:
	default:
		close(l.revoked)
	}
}

// expire revokes leases that have run longer than limit (the backstop for
// a peer that hangs without its connection breaking), and decides
// disputed tasks that no other peer can vote on any more.
func (q *queue) expire(limit time.Duration) {
	q.mu.Lock()
	var ls []*lease
	for _, l := range q.running {
		if time.Since(l.start) > limit {
			ls = append(ls, l)
		}
	}
	for t := range q.tasks {
		ts := &q.tasks[t]
		if ts.disputed && !ts.settled && ts.running == 0 && ts.need > 0 && !q.otherVoterLocked(t) {
			ts.need = 0
			q.pending = slices.DeleteFunc(q.pending, func(x int) bool { return x == t })
			q.r.mu.Lock()
			q.tallyLocked(t)
			q.r.mu.Unlock()
			q.signal()
		}
	}
	q.mu.Unlock()
	for _, l := range ls {
		revoke(l)
		q.finish(l, result{outcome: report.OutcomeLost, err: errors.New("lease expired: the peer did not answer in time")})
	}
}

// enrol notes a remote peer's enrolment and opens the queue once MinPeers
// have enrolled.
func (q *queue) enrol(peer string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.enrolled[peer] = true
	select {
	case <-q.open:
	default:
		if len(q.enrolled) >= q.r.opts.MinPeers {
			q.r.log.Info("enough peers enrolled; dispatching", "peers", len(q.enrolled))
			close(q.open)
		}
	}
}

// close ends the queue: workers waiting in next get errDrained.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	select {
	case <-q.open:
	default:
		close(q.open)
	}
	for _, l := range q.running {
		revoke(l)
	}
	for t := range q.tasks {
		q.cleanVotes(t)
	}
	q.signal()
}

// done reports whether every task is settled, and how many failed.
func (q *queue) done() (bool, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.remaining == 0, q.failed
}

// changed returns a channel closed at the next change.
func (q *queue) changed() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wake
}

// peerReport lists the trust the coordinator holds of each peer.
func (q *queue) peerReport() []report.PeerTrust {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []report.PeerTrust
	for name, t := range q.trust {
		if t.valid+t.invalid == 0 && !t.excluded {
			continue
		}
		out = append(out, report.PeerTrust{Peer: name, Valid: t.valid, Invalid: t.invalid, Excluded: t.excluded})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Peer < out[j].Peer })
	return out
}
