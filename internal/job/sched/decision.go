package sched

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/report"
)

// A Decision is what the queue decided under its lock, as a value: the
// queue makes it and its Applier carries it out after the lock is let go,
// in the order they were decided. Decisions are what a job's journal
// records (Record gives the stable form): replayed in order (Replay) they
// give the tasks' states, attempts, outputs and the exclusions again.
type Decision interface {
	// Record is the decision's stable, encodable form.
	Record() Record
	String() string
}

// Changed is the task whose record in the report d changed (ok false:
// none). The queue changes a task's record only with a decision that
// names the task: the records to journal are those these name.
func Changed(d Decision) (task int, ok bool) {
	switch d := d.(type) {
	case LeaseOut:
		return d.Task, true
	case Settle:
		return d.Task, true
	case Requeue:
		return d.Task, true
	case Placed:
		return d.Task, true
	case Done:
		return d.Task, true
	case Retry:
		return d.Task, true
	}
	return 0, false
}

// LeaseOut: a lease (one attempt of a task) was handed to a worker.
type LeaseOut struct {
	Lease      uint64
	Task       int
	TaskID     string
	Attempt    int
	Peer       string
	Start      time.Time
	DigestOnly bool
	Check      bool
	HandedOver bool
}

// Settle: an attempt ended and was recorded in the task's record (a
// result, or a copy taken back because the task was decided without it
// or its peer was excluded: Lease 0 then).
type Settle struct {
	Lease   uint64
	Task    int
	TaskID  string
	Attempt report.Attempt
}

// Requeue: the task wants N more replicas (Front: ahead of the tasks
// never tried).
type Requeue struct {
	Task   int
	TaskID string
	N      int
	Front  bool
}

// Accept: the task's output (Digest, from Peer) is to be placed. The
// applier places Output; the queue decides the rest (the task done, or
// another replica when the placing failed) only when it has been placed.
// Check: the output of a trusted run (spot check) that decides the task.
type Accept struct {
	Task   int
	TaskID string
	Peer   string
	Digest digest.ID
	Output Output
	Check  bool
}

// Placed: an Accept's output is in place; the task's record names it
// (Peer, Digest, Files). The task is done with the Done that follows, or
// once a spot check agrees.
type Placed struct {
	Task   int
	TaskID string
	Peer   string
	Digest digest.ID
	Files  []string
}

// Discard: a staged output that no vote needs any more is to be removed.
type Discard struct{ Stage string }

// Done: the task is decided for good (OK: accepted, its output placed;
// else failed, Err says why).
type Done struct {
	Task   int
	TaskID string
	OK     bool
	Err    string
}

// Retry: an attempt failed, or the task was reopened (Outcome
// OutcomeReopened), and the task goes back in the queue.
type Retry struct {
	Task    int
	TaskID  string
	Outcome string
	Err     error
}

// Exclude: the peer takes no more work in the job.
type Exclude struct {
	Peer   string
	Reason string
	Time   time.Time
}

// Reinstate: an excluded peer was forgiven (its lost votes were won by
// peers a spot check caught).
type Reinstate struct{ Peer string }

// Record is a decision's stable form: one flat object whose Kind names the
// decision, with the fields that kind uses (JSON, omitempty). Kinds and
// fields are only ever added, never renamed nor reused. An output's bytes
// and a fetch are not recorded: the journal holds outputs by digest.
type Record struct {
	Kind       string          `json:"kind"`
	Lease      uint64          `json:"lease,omitempty"`
	Task       int             `json:"task"` // -1: a decision about no task
	TaskID     string          `json:"task_id,omitempty"`
	Peer       string          `json:"peer,omitempty"`
	Attempt    int             `json:"attempt,omitempty"`
	Start      time.Time       `json:"start,omitzero"`
	DigestOnly bool            `json:"digest_only,omitempty"`
	Check      bool            `json:"check,omitempty"`
	HandedOver bool            `json:"handed_over,omitempty"`
	Settled    *report.Attempt `json:"settled,omitempty"`
	N          int             `json:"n,omitempty"`
	Front      bool            `json:"front,omitempty"`
	Digest     string          `json:"digest,omitempty"`
	Files      []string        `json:"files,omitempty"`
	Stage      string          `json:"stage,omitempty"`
	OK         bool            `json:"ok,omitempty"`
	Outcome    string          `json:"outcome,omitempty"`
	Err        string          `json:"err,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Time       time.Time       `json:"time,omitzero"`
}

// The kinds of Record.
const (
	KindLease     = "lease"
	KindSettle    = "settle"
	KindRequeue   = "requeue"
	KindAccept    = "accept"
	KindPlaced    = "placed"
	KindDiscard   = "discard"
	KindDone      = "done"
	KindRetry     = "retry"
	KindExclude   = "exclude"
	KindReinstate = "reinstate"
)

func (d LeaseOut) Record() Record {
	return Record{Kind: KindLease, Lease: d.Lease, Task: d.Task, TaskID: d.TaskID, Peer: d.Peer, Attempt: d.Attempt,
		Start: d.Start, DigestOnly: d.DigestOnly, Check: d.Check, HandedOver: d.HandedOver}
}

func (d Settle) Record() Record {
	a := d.Attempt
	return Record{Kind: KindSettle, Lease: d.Lease, Task: d.Task, TaskID: d.TaskID, Peer: a.Peer, Settled: &a}
}

func (d Requeue) Record() Record {
	return Record{Kind: KindRequeue, Task: d.Task, TaskID: d.TaskID, N: d.N, Front: d.Front}
}

func (d Accept) Record() Record {
	return Record{Kind: KindAccept, Task: d.Task, TaskID: d.TaskID, Peer: d.Peer, Digest: d.Digest.String(),
		Files: d.Output.Files, Stage: d.Output.Stage, Check: d.Check}
}

func (d Placed) Record() Record {
	return Record{Kind: KindPlaced, Task: d.Task, TaskID: d.TaskID, Peer: d.Peer, Digest: d.Digest.String(), Files: d.Files}
}

func (d Discard) Record() Record { return Record{Kind: KindDiscard, Task: -1, Stage: d.Stage} }

func (d Done) Record() Record {
	return Record{Kind: KindDone, Task: d.Task, TaskID: d.TaskID, OK: d.OK, Err: d.Err}
}

func (d Retry) Record() Record {
	r := Record{Kind: KindRetry, Task: d.Task, TaskID: d.TaskID, Outcome: d.Outcome}
	if d.Err != nil {
		r.Err = d.Err.Error()
	}
	return r
}

func (d Exclude) Record() Record {
	return Record{Kind: KindExclude, Task: -1, Peer: d.Peer, Reason: d.Reason, Time: d.Time}
}

func (d Reinstate) Record() Record { return Record{Kind: KindReinstate, Task: -1, Peer: d.Peer} }

func (d LeaseOut) String() string  { return d.Record().String() }
func (d Settle) String() string    { return d.Record().String() }
func (d Requeue) String() string   { return d.Record().String() }
func (d Accept) String() string    { return d.Record().String() }
func (d Placed) String() string    { return d.Record().String() }
func (d Discard) String() string   { return d.Record().String() }
func (d Done) String() string      { return d.Record().String() }
func (d Retry) String() string     { return d.Record().String() }
func (d Exclude) String() string   { return d.Record().String() }
func (d Reinstate) String() string { return d.Record().String() }

// String is the record as one line of JSON.
func (r Record) String() string {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Sprintf("%s task %d: %v", r.Kind, r.Task, err)
	}
	return string(b)
}

// Decision is the decision r records.
func (r Record) Decision() (Decision, error) {
	switch r.Kind {
	case KindLease:
		return LeaseOut{Lease: r.Lease, Task: r.Task, TaskID: r.TaskID, Attempt: r.Attempt, Peer: r.Peer, Start: r.Start,
			DigestOnly: r.DigestOnly, Check: r.Check, HandedOver: r.HandedOver}, nil
	case KindSettle:
		if r.Settled == nil {
			return nil, fmt.Errorf("decode decision %q of task %d: no attempt", r.Kind, r.Task)
		}
		return Settle{Lease: r.Lease, Task: r.Task, TaskID: r.TaskID, Attempt: *r.Settled}, nil
	case KindRequeue:
		return Requeue{Task: r.Task, TaskID: r.TaskID, N: r.N, Front: r.Front}, nil
	case KindAccept:
		d, err := digest.Parse(r.Digest)
		if err != nil {
			return nil, fmt.Errorf("decode decision %q of task %d: %w", r.Kind, r.Task, err)
		}
		return Accept{Task: r.Task, TaskID: r.TaskID, Peer: r.Peer, Digest: d, Output: Output{Stage: r.Stage, Files: r.Files}, Check: r.Check}, nil
	case KindPlaced:
		d, err := digest.Parse(r.Digest)
		if err != nil {
			return nil, fmt.Errorf("decode decision %q of task %d: %w", r.Kind, r.Task, err)
		}
		return Placed{Task: r.Task, TaskID: r.TaskID, Peer: r.Peer, Digest: d, Files: r.Files}, nil
	case KindDiscard:
		return Discard{Stage: r.Stage}, nil
	case KindDone:
		return Done{Task: r.Task, TaskID: r.TaskID, OK: r.OK, Err: r.Err}, nil
	case KindRetry:
		d := Retry{Task: r.Task, TaskID: r.TaskID, Outcome: r.Outcome}
		if r.Err != "" {
			d.Err = errors.New(r.Err)
		}
		return d, nil
	case KindExclude:
		return Exclude{Peer: r.Peer, Reason: r.Reason, Time: r.Time}, nil
	case KindReinstate:
		return Reinstate{Peer: r.Peer}, nil
	}
	return nil, fmt.Errorf("decode decision: unknown kind %q", r.Kind)
}
