package sched

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

// Queue hands out leases, takes results, votes and decides retries. Its
// state is split by concern: the tasks' scheduling and voting state
// (types.go, settle.go, vote.go), the peers (peers.go, trust.go), backup
// copies (backup.go), batching and the probe phase (batch.go, probe.go)
// and spot checks (spot.go). It changes nothing outside itself but the
// report's records, under ReportLock: what else it decides it hands to
// its Applier (apply.go) after letting its lock go.
//
// Lock order: mu, then ReportLock; lane.mu and Lease.revokeMu are
// leaves. The Applier runs under none of them.
type Queue struct {
	verify    spec.Verify
	retries   int
	strikes   int
	maxLost   int
	verifier  bool
	minPeers  int
	trustFile string
	self      string
	log       *slog.Logger
	apply     Applier
	clock     Clock
	rnd       *rand.Rand

	repMu sync.Locker
	rep   *report.Report
	recs  Records

	fetchCtx  context.Context
	stopFetch context.CancelFunc
	fetches   sync.WaitGroup

	// lane orders the batches of decisions (apply.go).
	lane lane

	mu sync.Mutex
	// cur holds what was decided under mu, to be applied when it is let
	// go (apply.go).
	cur       *batch
	wake      chan struct{} // closed and replaced when something changes
	waited    bool          // wake was handed out (Changed, Next)
	pending   []int         // tasks with need > 0, in order
	tasks     []taskState
	more      map[int]*taskMore // by task (taskMore)
	running   map[uint64]*Lease
	peers     peerState
	backup    backupState
	remaining int
	held      int // tasks held back (add.go), counted in remaining
	failed    int
	nextID    uint64
	closed    bool
	// moved is when a lease was last handed out or settled (Stalled).
	moved time.Time
	// open is closed once MinPeers peers have enrolled; leases wait for it.
	open chan struct{}
	// disputes are the tasks that became disputed (settled ones are
	// dropped by Expire); Expire decides those no peer can vote on.
	disputes []int
	spot     spotState
	batch    batchState
	// byID finds a task by ID (Adopt), built on first use.
	byID map[string]int
	// holds: leases are held back while this is above 0 (Hold).
	holds int
	probe probe
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
		spot:      spotState{fraction: v.SpotCheck},
		log:       cfg.Log,
		apply:     cfg.Apply,
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
		peers:     newPeerState(),
		remaining: len(cfg.Pending),
		open:      make(chan struct{}),
		batch:     batchState{max: cfg.BatchMax},
		probe:     newProbe(cfg.Probe),
	}
	q.lane.cond.L = &q.lane.mu
	if q.batch.max == 0 {
		q.batch.max = DefaultBatchMax
	}
	q.moved = q.now()
	if cfg.MinPeers <= 0 {
		close(q.open)
	}
	for _, t := range cfg.Pending {
		q.tasks[t] = taskState{need: int32(v.Replicas), quorum: int32(v.Quorum), queued: true}
	}
	q.holdLocked(cfg.Held, int32(v.Replicas), int32(v.Quorum))
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
	if !q.waited {
		return // nobody took the channel since it was made
	}
	close(q.wake)
	q.wake, q.waited = make(chan struct{}), false
}

func (q *Queue) drainedLocked() bool { return q.remaining == 0 || q.closed }

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
		q.revokeLocked(l)
	}
	for t := range q.more {
		q.cleanVotes(t)
	}
	for p := range q.peers.freed {
		q.slotFreeLocked(p)
	}
	q.signal()
	q.unlock(-1)
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
	q.waited = true
	return q.wake
}
