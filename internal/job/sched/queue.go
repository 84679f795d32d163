package sched

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/job/vc"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

// ErrDrained: no task is left to lease; the worker should stop.
var ErrDrained = errors.New("no tasks left")

// ErrExcluded: the peer lost too many votes and takes no more work.
var ErrExcluded = errors.New("excluded after losing votes")

// OutcomeReopened is the Env.TaskRetry outcome of a task that was
// accepted and is verified again, because a peer that voted for it was
// excluded: it is no longer done.
const OutcomeReopened = "reopened"

// Fault charges a failed attempt to its peer (Result.Fault): a strike.
// A peer with Config.Strikes strikes of one kind is excluded from the job.
type Fault int

const (
	// NoFault: the attempt ended through nobody's fault the queue can
	// name (the task itself, the submitter's side, the run ending).
	NoFault Fault = iota
	// FaultLost: the peer lost the attempt (its session ended with leases,
	// its lease expired, or it reported the attempt lost). Its next valid
	// result forgives these strikes: an unreliable peer is not a liar.
	FaultLost
	// FaultMalformed: the peer sent a result that is not well formed (its
	// files do not match its digest, an unknown outcome or digest). These
	// strikes are never forgiven.
	FaultMalformed
)

// Defaults of Config.Strikes and Config.MaxLost.
const (
	DefaultStrikes = 3
	DefaultMaxLost = 5
)

// Trust thresholds.
const (
	// TrustedStreak valid results in a row make a peer trusted under
	// adaptive replication.
	TrustedStreak = 10
	// ExcludeAfter lost votes exclude a peer from the job.
	ExcludeAfter = 3
	// VoterIdle: a worker that has not asked for work for this long no
	// longer counts as a peer that could still vote on a disputed task.
	VoterIdle = 30 * time.Second
)

// FetchFunc gets a digest-only replica's output files into dir.
type FetchFunc func(ctx context.Context, dir string) error

// Env is what a queue does outside its own state. Place, Discard,
// TaskDone and TaskRetry are called with the queue's locks held and must
// not call back into the queue; Fetch is called on a goroutine of its own.
type Env interface {
	// Place moves the accepted output out (a staged folder, gone
	// afterwards, or inline data) to the final place of task (index) id.
	Place(task int, id string, out Output) error
	// Discard removes a staged output that no vote needs any more.
	Discard(stage string)
	// Fetch gets the output of task id with digest d into a new stage
	// through fetch, checks it against d, and returns the stage and its
	// files; on error nothing is left behind.
	Fetch(ctx context.Context, id string, d digest.ID, fetch FetchFunc) (stage string, files []string, err error)
	// TaskDone: a task is decided for good (ok: accepted).
	TaskDone(id string, ok bool)
	// TaskRetry: an attempt failed, or a task was reopened, and the task
	// goes back in the queue.
	TaskRetry(id, outcome string, err error)
	// Touched: the queue changed task's record in the report (it holds
	// ReportLock): it is to be journaled.
	Touched(task int)
}

// Clock tells the time. Nil means the system clock.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Config sets up a Queue.
type Config struct {
	// JobID seeds the queue's random choices (adaptive replication).
	JobID   string
	Verify  spec.Verify
	Retries int
	// Pending are the indexes (into Report.Tasks) of the tasks to run.
	Pending []int
	// Alone: there are no peers to run replicas on, so results are taken
	// as they are (replicas 1) and the report says so.
	Alone bool
	// Verifier: the plugin checks outputs itself (sdk.Verifier), which
	// counts as verification.
	Verifier bool
	// BatchMax bounds a batch (batch.go): 0 is DefaultBatchMax, 1 turns
	// batching off.
	BatchMax int
	// Probe is the probe window (probe.go; ProbeWindow for a job that
	// batches): until a run time is measured, or for this long after the
	// first lease, each worker gets at most ProbeLeases leases. 0: no
	// probe phase.
	Probe time.Duration
	// MinPeers holds back every lease until this many peers enrolled.
	MinPeers int
	// Strikes (default DefaultStrikes) lost attempts in a row, or
	// malformed results in all, exclude a peer from the job (see Fault).
	Strikes int
	// MaxLost (default DefaultMaxLost) lost attempts of one task fail it,
	// listing why each was lost: a task nobody can finish does not go
	// round for ever.
	MaxLost int
	// TrustFile keeps peers' streaks across jobs (adaptive trust).
	TrustFile string
	// Self names the submitter's own slots: the worker whose results are
	// trusted for spot checks (Verify.SpotCheck; see NextCheck).
	Self string
	Log  *slog.Logger
	// Report is the job's report: the queue keeps each task's state,
	// attempts, votes and verdict (in the record Records gives), the
	// summary, the warnings and the exclusions there, holding ReportLock
	// while it does.
	Report *report.Report
	// Records gives the tasks' records; nil: Report.Tasks holds them.
	Records    Records
	ReportLock sync.Locker
	Env        Env
	Clock      Clock
}

// Lease is one attempt (one replica) of a task handed to one worker.
type Lease struct {
	ID      uint64
	Task    int // index into the report's (and the spec's) tasks
	TaskID  string
	Attempt int
	Peer    string
	Start   time.Time
	// Params are the task's params as its record holds them (canonical
	// JSON; empty if the record has none).
	Params []byte
	// DigestOnly: another replica uploads the output; this one reports
	// its digest (the peer keeps the files, fetched only if needed).
	DigestOnly bool
	// VC is the attempt's position in the job's shared state.
	VC *vc.Cursor
	// Check: a trusted run on the submitter's slot, whose result decides
	// the task (spot checks).
	Check bool
	// HandedOver: a result the peer finished in an earlier session of
	// the job and handed over (Adopt).
	HandedOver bool

	// revoked is closed when the lease is taken back (the task was
	// decided, the lease timed out, or the run ends: the worker should
	// stop the attempt) and when it is settled (so that nothing waits on
	// a finished lease).
	revoked chan struct{}
	// revokeMu guards isRevoked (revoked is closed by whoever comes
	// first) and onRevoke.
	revokeMu  sync.Mutex
	isRevoked bool
	onRevoke  func()
	settled   bool
	// leased is when this queue handed the lease out: Start, except for
	// a result handed over (Adopt), whose Start is the attempt's real,
	// earlier one. Expiry and backup copies go by it.
	leased time.Time
	// batched: handed out with others as one batch (Queue.Batched).
	batched bool
	// announced: the attempt of an earlier session that the peer still
	// runs (AdoptRunning): never copied as a straggler.
	announced bool
}

// Revoked is closed when the lease is taken back or settled.
func (l *Lease) Revoked() <-chan struct{} { return l.revoked }

// OnRevoke has fn called once, when the lease is taken back or settled
// (at once if it was), in place of a goroutine per lease that waits on
// Revoked. fn must not block nor call the queue: it may run with the
// queue's locks held. A later OnRevoke replaces fn.
func (l *Lease) OnRevoke(fn func()) {
	l.revokeMu.Lock()
	if l.isRevoked {
		l.revokeMu.Unlock()
		fn()
		return
	}
	l.onRevoke = fn
	l.revokeMu.Unlock()
}

// Result is what a worker reports for a lease.
type Result struct {
	Outcome string
	Err     error
	// Stage is a folder holding the complete output (outcome ok, unless
	// digest-only or inline); it is placed if this copy wins, discarded
	// otherwise. Fetch gets the output of a digest-only replica.
	Stage string
	Files []string
	// Inline: the output is Data alone (Files is [sdk.DataFile]) or
	// nothing (Files empty), held in memory: no folder (Stage is "").
	Inline bool
	Data   []byte
	Fetch  FetchFunc
	Digest digest.ID
	// Start is when the task started to run (zero: the lease's start),
	// End when it ended.
	Start, End time.Time
	// Fault charges a lost attempt to its peer.
	Fault Fault
	// Device is the device the attempt's slot bound (report.Attempt).
	Device string
}

// Output is a complete output as a worker produced it: a staged folder
// holding Files, or (Inline) the inline data file alone or nothing, in
// memory.
type Output struct {
	Stage  string
	Files  []string
	Inline bool
	Data   []byte
}

// held: the output is here, in a folder or in memory.
func (o Output) held() bool { return o.Stage != "" || o.Inline }

func (r *Result) output() Output {
	return Output{Stage: r.Stage, Files: r.Files, Inline: r.Inline, Data: r.Data}
}

// vote is a replica's successful result.
type vote struct {
	peer   string
	digest digest.ID
	// out holds the output, if this replica uploaded it; fetch gets it
	// into a folder otherwise.
	out   Output
	fetch FetchFunc
}

// taskState is the scheduling and voting state of one task: small and
// pointer-free, for a job of a million tasks holds a million of them
// (the collector need not scan them). What only the tasks at work, or
// the decided tasks of a verified job, need is in Queue.more.
type taskState struct {
	need     int32 // replicas still to start
	running  int32
	started  int32 // replicas started, failed ones included
	failures int32 // replicas that failed (task error, crash, timeout)
	quorum   int32 // matching votes needed (1 when adaptive trust skips replication)
	disputed bool
	settled  bool
	queued   bool // in Queue.pending (pending.go)
	fetching bool // an accepted output is being fetched
	// check: a trusted run is wanted or running, and decides the task;
	// trusted: a trusted run decided it.
	check, trusted bool
}

// taskMore is the state of a task beyond taskState: its votes, why its
// lost attempts were lost, its accepted digest. A task has one from its
// first vote or lost attempt; a decided task keeps it only where it is
// read again (keepVotes: a verified or spot-checked job).
type taskMore struct {
	votes    []vote
	lost     []string  // why each lost attempt was lost ("peer: error")
	accepted digest.ID // the accepted digest, once settled
}

// m is task's taskMore, made on first use.
func (q *Queue) m(task int) *taskMore {
	m := q.more[task]
	if m == nil {
		m = &taskMore{}
		q.more[task] = m
	}
	return m
}

// votesOf is task's votes (nil: none).
func (q *Queue) votesOf(task int) []vote {
	if m := q.more[task]; m != nil {
		return m.votes
	}
	return nil
}

// accepted is task's accepted digest (zero if not kept).
func (q *Queue) accepted(task int) digest.ID {
	if m := q.more[task]; m != nil {
		return m.accepted
	}
	return digest.ID{}
}

// Queue hands out leases, takes results, votes and decides retries.
//
// Lock order: the queue's lock, then ReportLock.
type Queue struct {
	verify    spec.Verify
	retries   int
	strikes   int
	maxLost   int
	verifier  bool
	minPeers  int
	trustFile string
	self      string
	spot      float64
	log       *slog.Logger
	env       Env
	clock     Clock
	rnd       *rand.Rand

	repMu sync.Locker
	rep   *report.Report
	recs  Records

	fetchCtx  context.Context
	stopFetch context.CancelFunc
	fetches   sync.WaitGroup

	// mu is taken before ReportLock and before what OnRevoke callbacks
	// take (package job: remoteWorker.mu); revokeMu is a leaf.
	mu      sync.Mutex
	wake    chan struct{} // closed and replaced when something changes
	pending []int         // tasks with need > 0, in order
	tasks   []taskState
	more    map[int]*taskMore // by task (taskMore)
	running map[uint64]*Lease
	trust   map[string]*peerTrust
	// savedStreak: the streaks of the trust file, by node ID (NodeID).
	savedStreak map[string]int
	workers     map[string]time.Time // peers that asked for work recently
	remaining   int
	failed      int
	nextID      uint64
	durations   []time.Duration // of successful attempts, for backup decisions
	median      time.Duration   // of durations[:medianOf]
	medianOf    int
	// heard is when each worker last reported a result (not a lost one).
	heard map[string]time.Time
	// backupAt: no running lease can be taken for a backup copy under
	// backupThreshold before this time (backupCandidateLocked).
	backupAt        time.Time
	backupThreshold time.Duration
	// backupOwn: the scan found leases to take, all of this worker, which
	// may not take its own: until backupAt only it skips the scan.
	backupOwn string
	closed    bool
	// moved is when a lease was last handed out or settled (Stalled).
	moved time.Time
	// open is closed once MinPeers peers have enrolled; leases wait for it.
	open chan struct{}
	// enrolled: the remote peers enrolled, with their hosts ("" when the
	// job lets replicas share a host).
	enrolled map[string]string
	// disputes are the tasks that became disputed (settled ones are
	// dropped by Expire); Expire decides those no peer can vote on.
	disputes []int
	// checks are the tasks waiting for a trusted run; caught: a spot check
	// caught a wrong result.
	checks []int
	caught bool
	// byID finds a task by ID (Adopt), built on first use.
	byID map[string]int
	// holds: leases are held back while this is above 0 (Hold).
	holds int
	// Batching (batch.go): the recent run times of successful attempts
	// (runN of them in all), slots of the workers, the probe phase.
	batchMax int
	runs     [runSamples]time.Duration
	runN     int
	slots    map[string]int
	probe    probe
}

// New returns a queue over cfg.Pending.
func New(cfg Config) *Queue {
	v := cfg.Verify
	if v.Replicas < 1 {
		v.Replicas = 1
	}
	if v.Quorum < 1 || v.Quorum > v.Replicas {
		v.Quorum = v.Replicas
	}
	if v.MaxReplicas < v.Replicas {
		v.MaxReplicas = v.Replicas
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if v.Replicas > 1 && cfg.Alone {
		// Replicas must run on distinct peers; alone there are none to
		// compare with, so results are taken as they are, and the
		// report says so.
		cfg.Log.Warn("verify: no peers to run replicas on; results are not verified", "replicas", v.Replicas)
		cfg.ReportLock.Lock()
		cfg.Report.Warnings = append(cfg.Report.Warnings, fmt.Sprintf("verify asked for %d replicas, but the job ran on this machine alone: results are not verified", v.Replicas))
		cfg.ReportLock.Unlock()
		v.Replicas, v.Quorum, v.MaxReplicas = 1, 1, 1
	}
	if cfg.Strikes <= 0 {
		cfg.Strikes = DefaultStrikes
	}
	if cfg.MaxLost <= 0 {
		cfg.MaxLost = DefaultMaxLost
	}
	recs := cfg.Records
	if recs == nil {
		recs = sliceRecords{cfg.Report}
	}
	h := fnv.New64a()
	h.Write([]byte(cfg.JobID))
	fctx, stop := context.WithCancel(context.Background())
	q := &Queue{
		verify:    v,
		retries:   cfg.Retries,
		strikes:   cfg.Strikes,
		maxLost:   cfg.MaxLost,
		verifier:  cfg.Verifier,
		minPeers:  cfg.MinPeers,
		trustFile: cfg.TrustFile,
		self:      cfg.Self,
		spot:      v.SpotCheck,
		log:       cfg.Log,
		env:       cfg.Env,
		clock:     cfg.Clock,
		rnd:       rand.New(rand.NewPCG(h.Sum64(), 0x9e3779b97f4a7c15)),
		repMu:     cfg.ReportLock,
		rep:       cfg.Report,
		recs:      recs,
		fetchCtx:  fctx,
		stopFetch: stop,
		wake:      make(chan struct{}),
		pending:   slices.Clone(cfg.Pending),
		tasks:     make([]taskState, recs.Len()),
		more:      map[int]*taskMore{},
		running:   map[uint64]*Lease{},
		trust:     map[string]*peerTrust{},
		workers:   map[string]time.Time{},
		heard:     map[string]time.Time{},
		remaining: len(cfg.Pending),
		open:      make(chan struct{}),
		enrolled:  map[string]string{},
		batchMax:  cfg.BatchMax,
		slots:     map[string]int{},
		probe:     newProbe(cfg.Probe),
	}
	if q.batchMax == 0 {
		q.batchMax = DefaultBatchMax
	}
	q.moved = q.now()
	if cfg.MinPeers <= 0 {
		close(q.open)
	}
	for _, t := range cfg.Pending {
		q.tasks[t] = taskState{need: int32(v.Replicas), quorum: int32(v.Quorum), queued: true}
	}
	if v.Trust == spec.TrustAdaptive {
		q.loadTrust()
	}
	return q
}

func (q *Queue) now() time.Time { return q.clock.Now() }

// Records gives the queue the tasks' records in the report. A job of a
// million tasks need not hold a million records in memory: the runner
// keeps those of the tasks at work and reads a decided task's back from
// its journal when the queue asks for it again (rare: a reopened vote).
type Records interface {
	// Len is the number of tasks.
	Len() int
	// ID is task's ID (any time).
	ID(task int) string
	// Task is task's record, to read and change with ReportLock held;
	// it is valid until ReportLock is let go.
	Task(task int) *report.Task
}

// sliceRecords are the records of Report.Tasks.
type sliceRecords struct{ rep *report.Report }

func (s sliceRecords) Len() int                   { return len(s.rep.Tasks) }
func (s sliceRecords) ID(task int) string         { return s.rep.Tasks[task].ID }
func (s sliceRecords) Task(task int) *report.Task { return &s.rep.Tasks[task] }

// rec is task's record (ReportLock held).
func (q *Queue) rec(task int) *report.Task { return q.recs.Task(task) }

// Verifying reports whether results are verified (replicas, or the
// plugin's own check).
func (q *Queue) Verifying() bool { return q.verify.Replicas > 1 || q.verifier }

func (q *Queue) signal() {
	close(q.wake)
	q.wake = make(chan struct{})
}

func (q *Queue) drainedLocked() bool { return q.remaining == 0 || q.closed }

// Next blocks until a task can be leased to peer and returns the lease,
// or ErrDrained when the job has nothing left, ErrExcluded when the peer
// may not work for the job any more, or ctx's error.
func (q *Queue) Next(ctx context.Context, peer string) (*Lease, error) {
	return q.next(ctx, peer, false)
}

func (q *Queue) next(ctx context.Context, peer string, checkOnly bool) (*Lease, error) {
	select {
	case <-q.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		q.mu.Lock()
		if q.drainedLocked() {
			q.mu.Unlock()
			return nil, ErrDrained
		}
		if q.trustOf(peer).excluded {
			// Told so, the worker stops asking (a remote peer's session
			// ends for good): it is no voter for the tasks left, even if a
			// spot check reinstates it, so the submitter decides them.
			delete(q.workers, peer)
			q.mu.Unlock()
			return nil, ErrExcluded
		}
		var l *Lease
		if peer == q.self && q.self != "" && q.holds == 0 {
			l = q.takeCheckLocked(checkOnly)
		}
		if !checkOnly {
			q.workers[peer] = q.now()
			if l == nil && q.holds == 0 {
				l = q.takeLocked(peer)
			}
		}
		if l != nil {
			q.mu.Unlock()
			return l, nil
		}
		wake := q.wake
		wait := 250 * time.Millisecond // re-check backup candidates
		if held, left := q.probe.hold(peer, q.now()); held {
			wait = min(wait, left) // the probe window's end
		}
		q.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// TryNext returns a lease for peer if one can be had right now, without
// waiting (a peer's prefetch); nil otherwise.
func (q *Queue) TryNext(peer string) *Lease {
	select {
	case <-q.open:
	default:
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.drainedLocked() || q.trustOf(peer).excluded || q.holds > 0 {
		return nil
	}
	return q.takeLocked(peer)
}

// takeLocked leases peer its next task, if it may have one now (the
// probe phase holds a worker to ProbeLeases).
func (q *Queue) takeLocked(peer string) *Lease {
	now := q.now()
	if held, _ := q.probe.hold(peer, now); held {
		return nil
	}
	l := q.takeTaskLocked(peer)
	if l != nil {
		q.probe.leased(peer, now)
	}
	return l
}

// takeTaskLocked picks the task peer runs next: a pending one, else a
// backup copy near the end.
func (q *Queue) takeTaskLocked(peer string) *Lease {
	for i, t := range q.pending {
		if q.involvedLocked(peer, t) {
			continue
		}
		ts := &q.tasks[t]
		first := ts.started == 0
		ts.need--
		if ts.need <= 0 {
			q.unqueueAtLocked(i)
		}
		if first && q.verify.Trust == spec.TrustAdaptive && q.verify.Replicas > 1 {
			// Adaptive replication (BOINC): a trusted peer's result is
			// replicated only with probability 1/streak.
			if tr := q.trustOf(peer); tr.streak >= TrustedStreak && q.rnd.Float64() >= 1/float64(tr.streak) {
				ts.quorum = 1
				if ts.need > 0 {
					ts.need = 0
					q.unqueueLocked(t)
				}
			}
		}
		return q.leaseLocked(t, peer, !first && q.Verifying())
	}
	if len(q.pending) > 0 {
		return nil
	}
	// Nothing pending: near the end of the job an idle worker may run a
	// backup copy of the slowest running task (first valid result wins).
	if !q.Verifying() {
		if t, ok := q.backupCandidateLocked(peer); ok {
			l := q.leaseLocked(t, peer, false)
			q.log.Debug("backup copy of a straggler", "task", l.TaskID, "peer", peer, "attempt", l.Attempt)
			return l
		}
	}
	return nil
}

// involvedLocked: peer (or, verifying with distinct hosts, a peer of its
// host) runs a replica of task, or already voted on it. Replicas of a
// task go to distinct peers, and distinct hosts.
func (q *Queue) involvedLocked(peer string, task int) bool {
	host := ""
	if q.Verifying() {
		host = q.enrolled[peer]
	}
	same := func(p string) bool { return p == peer || (host != "" && q.enrolled[p] == host) }
	if q.tasks[task].running > 0 { // else no need to scan every lease
		for _, l := range q.running {
			if l.Task == task && same(l.Peer) {
				return true
			}
		}
	}
	if q.Verifying() {
		for _, v := range q.votesOf(task) {
			if same(v.peer) {
				return true
			}
		}
	}
	return false
}

// backupCandidateLocked picks the running task that has run longest, if
// it has only one copy, is not held by peer, and has run for more than
// twice the median successful attempt (and at least a second). A batched
// lease waits behind the others of its batch and its worker's queue: it
// is taken for a straggler only if its worker has reported nothing for
// as long (stuck, not busy), or every queued batch of a busy worker would
// be run twice near the end of a job.
func (q *Queue) backupCandidateLocked(peer string) (int, bool) {
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
	now := q.now()
	// Idle workers ask at every result near the end: before backupAt no
	// lease can be taken (see below), so the scan over every running
	// lease waits for it; by backupOwn only, when the only leases that
	// could be taken are its own.
	if threshold == q.backupThreshold && now.Before(q.backupAt) && (q.backupOwn == "" || q.backupOwn == peer) {
		return 0, false
	}
	// next is the earliest time a lease skipped now may be taken. Time
	// alone changes the answer: a new lease is younger, a worker heard
	// again only waits longer; the one event that does (a task's copies
	// drop to one) clears backupAt (dropCopyLocked).
	var best *Lease
	own := false // peer holds a lease that could be taken
	next := now.Add(threshold)
	for _, l := range q.running {
		if q.tasks[l.Task].running != 1 || l.announced {
			continue
		}
		at := l.leased.Add(threshold)
		if l.batched {
			// Its worker is busy with its queue until it has been
			// silent for as long.
			if h := q.heard[l.Peer].Add(threshold); h.After(at) {
				at = h
			}
		}
		if now.Before(at) {
			if at.Before(next) {
				next = at
			}
			continue
		}
		if l.Peer == peer {
			own = true // another worker may take it
			continue
		}
		if best == nil || l.leased.Before(best.leased) {
			best = l
		}
	}
	q.backupOwn = ""
	switch {
	case best != nil:
		next = now // the others taken by then stay candidates
	case own:
		q.backupOwn = peer // any other worker asks again at once
	}
	q.backupAt, q.backupThreshold = next, threshold
	if best == nil {
		return 0, false
	}
	return best.Task, true
}

// dropCopyLocked counts one running copy of task less. A task left with
// one copy may be backed up now: backupCandidateLocked looks again.
func (q *Queue) dropCopyLocked(task int) {
	ts := &q.tasks[task]
	ts.running--
	if ts.running == 1 {
		q.backupAt = time.Time{}
	}
}

func (q *Queue) leaseLocked(task int, peer string, digestOnly bool) *Lease {
	q.nextID++
	ts := &q.tasks[task]
	q.repMu.Lock()
	rt := q.rec(task)
	attempt := len(rt.Attempts) + int(ts.running)
	rt.State = report.TaskRunning
	id, params := rt.ID, rt.Params
	q.env.Touched(task)
	q.repMu.Unlock()
	l := &Lease{
		ID:         q.nextID,
		Task:       task,
		TaskID:     id,
		Attempt:    attempt,
		Peer:       peer,
		Params:     params,
		Start:      q.now().UTC(),
		DigestOnly: digestOnly,
		revoked:    make(chan struct{}),
	}
	l.leased = l.Start
	l.VC = vc.NewCursor(id, l.revoked)
	q.running[l.ID] = l
	q.moved = q.now()
	ts.running++
	ts.started++
	return l
}

// Finish settles a lease: records the attempt, counts the vote, and
// decides the task when it can. It returns whether the task was accepted
// with this result. It takes over res.Stage: the folder is kept with the
// vote, placed if the vote wins, discarded otherwise.
func (q *Queue) Finish(l *Lease, res Result) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	kept := false
	defer func() {
		if !kept && res.Stage != "" {
			q.env.Discard(res.Stage)
		}
	}()
	if l.settled {
		return false
	}
	l.settled = true
	revoke(l) // the attempt is over: whatever waits on it may stop
	delete(q.running, l.ID)
	q.moved = q.now()
	if res.Outcome != report.OutcomeLost {
		q.heard[l.Peer] = q.moved
	}
	ts := &q.tasks[l.Task]
	q.dropCopyLocked(l.Task)
	defer q.signal()
	if res.End.IsZero() {
		res.End = q.now().UTC()
	}
	if l.Check {
		q.repMu.Lock()
		defer q.repMu.Unlock()
		q.recordLocked(l, res)
		var accepted bool
		accepted, kept = q.checkedLocked(l, res)
		return accepted
	}

	if q.closed && res.Outcome == report.OutcomeLost {
		res.Outcome = report.OutcomeCanceled // the run ends: nobody lost it
	}
	q.repMu.Lock()
	defer q.repMu.Unlock()
	defer q.env.Touched(l.Task) // runs before the unlock
	if ts.settled {
		if res.Outcome != report.OutcomeOK {
			res.Outcome = report.OutcomeCanceled
		}
		q.recordLocked(l, res)
		return false
	}
	q.recordLocked(l, res)
	rt := q.rec(l.Task)
	switch res.Outcome {
	case report.OutcomeOK:
		if q.trustOf(l.Peer).excluded {
			rt.Attempts[len(rt.Attempts)-1].Error = "peer excluded: vote ignored"
			q.needLocked(l.Task, 1)
			return false
		}
		q.trustOf(l.Peer).losses = 0 // a valid result forgives lost attempts
		q.m(l.Task).votes = append(q.votesOf(l.Task), vote{peer: l.Peer, digest: res.Digest, out: res.output(), fetch: res.Fetch})
		kept = true
		q.durations = append(q.durations, res.End.Sub(l.Start))
		q.noteRunLocked(l, res)
		return q.tallyLocked(l.Task)
	case report.OutcomeRejected:
		// The plugin's check rejected the output: a lost vote.
		tr := q.trustOf(l.Peer)
		tr.invalid++
		tr.streak = 0
		if tr.invalid >= ExcludeAfter && !tr.excluded {
			q.excludeLocked(l.Peer, fmt.Sprintf("%d outputs rejected by the plugin's check", tr.invalid), true)
		}
		if int(ts.started) >= q.verify.MaxReplicas+q.retries {
			if ts.running == 0 {
				q.failLocked(l.Task, fmt.Errorf("every output was rejected by the plugin's check (%d tries)", ts.started))
			}
			return false
		}
		q.needLocked(l.Task, 1)
		return false
	case report.OutcomeCanceled:
		q.needFrontLocked(l.Task, 1)
		return false
	case report.OutcomeLost:
		return q.lostLocked(l, res)
	default:
		ts.failures++
		if int(ts.failures) <= q.retries {
			headline, _ := report.Excerpt(errText(res.Err))
			q.log.Info("task attempt failed, retrying", "task", l.TaskID, "peer", l.Peer, "outcome", res.Outcome, "err", headline)
			q.env.TaskRetry(l.TaskID, res.Outcome, res.Err)
			q.needLocked(l.Task, 1)
			return false
		}
		if ts.running > 0 || ts.need > 0 {
			return false // other replicas may still decide it
		}
		if len(q.votesOf(l.Task)) > 0 {
			return q.tallyLocked(l.Task)
		}
		q.failLocked(l.Task, res.Err)
		return false
	}
}

// recordLocked appends l's attempt to the report.
func (q *Queue) recordLocked(l *Lease, res Result) {
	att := report.Attempt{Peer: l.Peer, Start: l.Start, End: res.End, Outcome: res.Outcome, Resumed: l.VC.Resumed(), HandedOver: l.HandedOver, Device: res.Device}
	if res.Err != nil {
		att.Error = res.Err.Error()
	}
	if l.Check {
		att.Check = true
	}
	rt := q.rec(l.Task)
	rt.Attempts = append(rt.Attempts, att)
}

// lostLocked settles a lost attempt: the peer is charged as res.Fault
// says, and the task runs again ahead of tasks never tried, unless it was
// lost MaxLost times: then it fails, listing why each attempt was lost.
func (q *Queue) lostLocked(l *Lease, res Result) bool {
	ts := &q.tasks[l.Task]
	if q.closed {
		q.needFrontLocked(l.Task, 1) // the run ends: nobody is to blame
		return false
	}
	q.chargeLocked(l.Peer, res.Fault, res.Err)
	m := q.m(l.Task)
	m.lost = append(m.lost, l.Peer+": "+errText(res.Err))
	if len(m.lost) < q.maxLost {
		q.log.Info("lease lost, task requeued", "task", l.TaskID, "peer", l.Peer, "lost", len(m.lost), "err", res.Err)
		q.needFrontLocked(l.Task, 1)
		return false
	}
	if ts.running > 0 {
		return false // the replicas still running may decide it
	}
	err := fmt.Errorf("lost %d times: %s", len(m.lost), strings.Join(m.lost, "; "))
	q.failLocked(l.Task, err)
	q.rec(l.Task).Verdict = "failed: " + err.Error()
	return false
}

func errText(err error) string {
	if err == nil {
		return "lost"
	}
	return err.Error()
}

// needLocked asks for n more replicas of task, after the tasks already
// pending.
func (q *Queue) needLocked(task, n int) { q.requeueLocked(task, n, false) }

// needFrontLocked asks for n more replicas of task ahead of every pending
// task: its attempt was lost or taken back, and it should not wait for
// the tasks never tried.
func (q *Queue) needFrontLocked(task, n int) { q.requeueLocked(task, n, true) }

func (q *Queue) requeueLocked(task, n int, front bool) {
	ts := &q.tasks[task]
	if ts.settled {
		return
	}
	ts.need += int32(n)
	q.enqueueLocked(task, front)
	q.rec(task).State = report.TaskPending
	q.env.Touched(task)
}

// settleLocked takes task out of the work left: it is decided.
func (q *Queue) settleLocked(task int) {
	ts := &q.tasks[task]
	ts.settled = true
	ts.need = 0
	q.unqueueLocked(task)
	q.remaining--
}

func (q *Queue) failLocked(task int, err error) {
	rt := q.rec(task)
	q.settleLocked(task)
	q.failed++
	rt.State = report.TaskFailed
	rt.Error = "failed"
	if err != nil {
		rt.Error = err.Error()
	}
	rt.Votes = reportVotes(rt.Votes[:0], q.votesOf(task))
	if q.Verifying() {
		rt.Verdict = "failed: " + err.Error()
	}
	q.rep.Summary.Failed++
	q.env.Touched(task)
	// The summary and the report say why in full; the log line says it
	// in one line.
	headline, _ := report.Excerpt(rt.Error)
	q.log.Warn("task failed", "task", rt.ID, "attempts", len(rt.Attempts), "err", headline)
	q.log.Debug("task failed", "task", rt.ID, "err", err)
	q.env.TaskDone(rt.ID, false)
	q.revokeCopiesLocked(task)
	q.cleanVotes(task)
	if !q.keepVotes() {
		delete(q.more, task)
	}
}

// cleanVotes discards staged outputs that lost.
func (q *Queue) cleanVotes(task int) {
	for i := range q.votesOf(task) {
		v := &q.votesOf(task)[i]
		if v.out.Stage != "" {
			q.env.Discard(v.out.Stage)
		}
		v.out = Output{}
	}
}

func (q *Queue) revokeCopiesLocked(task int) {
	if q.tasks[task].running == 0 {
		return // the usual case: no other copy (the scan is of every lease)
	}
	for _, l := range q.running {
		if l.Task == task {
			revoke(l)
			delete(q.running, l.ID)
			q.dropCopyLocked(task)
			l.settled = true
			rt := q.rec(task)
			rt.Attempts = append(rt.Attempts, report.Attempt{
				Peer: l.Peer, Start: l.Start, End: q.now().UTC(), Outcome: report.OutcomeCanceled, Error: "the task was decided without it",
			})
			q.env.Touched(task)
		}
	}
}

// Lose settles every running lease of peer as lost (the peer went away)
// and requeues their tasks at once. It returns how many leases it took.
func (q *Queue) Lose(peer string, why error) int {
	return q.settlePeer(peer, report.OutcomeLost, why)
}

// Cancel settles every running lease of peer as canceled (the run ends,
// and its session with it: nobody is to blame) and requeues their tasks.
// It returns how many leases it took.
func (q *Queue) Cancel(peer string, why error) int {
	return q.settlePeer(peer, report.OutcomeCanceled, why)
}

func (q *Queue) settlePeer(peer, outcome string, why error) int {
	q.mu.Lock()
	var ls []*Lease
	for _, l := range q.running {
		if l.Peer == peer {
			ls = append(ls, l)
		}
	}
	q.mu.Unlock()
	// Each requeued task goes to the front: the newest lease first, so
	// that the oldest runs first again.
	slices.SortFunc(ls, func(a, b *Lease) int { return cmp.Compare(b.ID, a.ID) })
	for i, l := range ls {
		revoke(l)
		res := Result{Outcome: outcome, Err: why}
		if i == 0 && outcome == report.OutcomeLost {
			res.Fault = FaultLost // one strike per lost session, not per lease
		}
		q.Finish(l, res)
	}
	return len(ls)
}

// revoke closes l.revoked once, whoever calls it first: a peer's lost
// session (without the queue's lock) and a replica's win that revokes
// the task's other copies (with it) may both reach the same lease.
func revoke(l *Lease) {
	l.revokeMu.Lock()
	if l.isRevoked {
		l.revokeMu.Unlock()
		return
	}
	l.isRevoked = true
	close(l.revoked)
	fn := l.onRevoke
	l.onRevoke = nil
	l.revokeMu.Unlock()
	if fn != nil {
		fn()
	}
}

// Expire revokes leases that have run longer than limit (the backstop for
// a peer that hangs without its connection breaking), and decides
// disputed tasks that no other peer can vote on any more.
func (q *Queue) Expire(limit time.Duration) {
	q.mu.Lock()
	now := q.now()
	var ls []*Lease
	for _, l := range q.running {
		if now.Sub(l.leased) > limit {
			ls = append(ls, l)
		}
	}
	// Only disputed tasks can be decided here: the list of them, not
	// every task, is scanned (a sweep runs twice a second).
	q.disputes = slices.DeleteFunc(q.disputes, func(t int) bool { return q.tasks[t].settled })
	for _, t := range slices.Clone(q.disputes) {
		ts := &q.tasks[t]
		if !ts.settled && ts.running == 0 && ts.need > 0 && !q.otherVoterLocked(t) {
			ts.need = 0
			q.unqueueLocked(t)
			q.repMu.Lock()
			q.tallyLocked(t)
			q.repMu.Unlock()
			q.signal()
		}
	}
	q.mu.Unlock()
	slices.SortFunc(ls, func(a, b *Lease) int { return cmp.Compare(b.ID, a.ID) }) // as in Lose
	charged := map[string]bool{}
	for _, l := range ls {
		revoke(l)
		res := Result{Outcome: report.OutcomeLost, Err: errors.New("lease expired: the peer did not answer in time")}
		if !charged[l.Peer] {
			res.Fault, charged[l.Peer] = FaultLost, true // one strike per peer and sweep
		}
		q.Finish(l, res)
	}
}

// disputeLocked marks task disputed: two digests were seen, or a peer
// that voted for it was excluded.
func (q *Queue) disputeLocked(task int) {
	ts := &q.tasks[task]
	if !ts.disputed || !slices.Contains(q.disputes, task) {
		q.disputes = append(q.disputes, task)
	}
	ts.disputed = true
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
	q.enrolled[peer] = host
	select {
	case <-q.open:
	default:
		if len(q.enrolled) >= q.minPeers {
			q.log.Info("enough peers enrolled; dispatching", "peers", len(q.enrolled))
			close(q.open)
		}
	}
}

// Close ends the queue: workers waiting in Next get ErrDrained, running
// leases are revoked, staged votes discarded, and output fetches stopped
// and waited for.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	select {
	case <-q.open:
	default:
		close(q.open)
	}
	for _, l := range q.running {
		revoke(l)
	}
	for t := range q.more {
		q.cleanVotes(t)
	}
	q.signal()
	q.mu.Unlock()
	q.stopFetch()
	q.fetches.Wait()
}

// Done reports whether every task is settled, and how many failed.
func (q *Queue) Done() (bool, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.remaining == 0, q.failed
}

// Running counts the tasks that have an attempt running and are not
// decided yet.
func (q *Queue) Running() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	// The running leases, not every task, are scanned: this is asked
	// five times a second.
	seen := make(map[int]bool, len(q.running))
	for _, l := range q.running {
		if ts := &q.tasks[l.Task]; ts.running > 0 && !ts.settled && !seen[l.Task] {
			seen[l.Task] = true
		}
	}
	return len(seen)
}

// Copy is a running attempt of a task, as a watcher shows it.
type Copy struct {
	TaskID string
	Peer   string // the worker's key (report.SplitPeer)
	Start  time.Time
	Check  bool // a trusted run on the submitter's slot
}

// RunningCopies lists where the running attempts of each undecided task
// run, by task index, oldest first: the first copy, then its replicas
// and backups. Only the running leases are scanned.
func (q *Queue) RunningCopies() map[int][]Copy {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[int][]Copy, len(q.running))
	for _, l := range q.running {
		if ts := &q.tasks[l.Task]; ts.settled {
			continue
		}
		out[l.Task] = append(out[l.Task], Copy{TaskID: l.TaskID, Peer: l.Peer, Start: l.Start, Check: l.Check})
	}
	for _, cs := range out {
		slices.SortFunc(cs, func(a, b Copy) int { return a.Start.Compare(b.Start) })
	}
	return out
}

// Changed returns a channel closed at the next change.
func (q *Queue) Changed() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wake
}

// PeerReport lists the trust the coordinator holds of each peer that
// voted or was excluded.
func (q *Queue) PeerReport() []report.PeerTrust {
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
