package sched

import (
	"context"
	"errors"
	"log/slog"
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

// OutcomeReopened is the Retry outcome of a task that was
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

// Applier carries out what the queue decided (Decision values) after the
// queue's lock is let go: Apply gets one batch at a time, in the order
// the decisions were made, under no lock of the queue, and carries them
// out in that order. It may ask the queue for its state (Done, Running,
// ...) but must not lease nor settle: that waits for the batch it
// applies. It must not keep ds, which the queue reuses (the decisions
// are values: copies may be kept). Apply returns nil, or an error for
// each decision (by index); only an Accept's counts: its output was not
// placed, and the queue decides again.
type Applier interface {
	Apply(ds []Decision) []error
	// Fetch gets the output of task id with digest d into a new stage
	// through fetch, checks it against d, and returns the stage and its
	// files; on error nothing is left behind. It is called on a goroutine
	// of the queue's own, without its lock.
	Fetch(ctx context.Context, id string, d digest.ID, fetch FetchFunc) (stage string, files []string, err error)
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
	// Held are tasks to run once released (add.go: Release, Drop); a
	// task in Pending too is pending.
	Held []int
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
	Apply      Applier
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
// Revoked. fn runs on the goroutine that took the lease back, under no
// lock of the queue (after its decisions are applied), and must not
// block. A later OnRevoke replaces fn.
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
	held     bool // counted, not leased until Release (add.go)
	fetching bool // an accepted output is being fetched
	// placing: an Accept of the task is being applied; until it is, the
	// task takes no vote and no lease, as if decided.
	placing bool
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
