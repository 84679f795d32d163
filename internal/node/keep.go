package node

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/report"
)

// Results kept for a coordinator that went away (hand-over).
//
// A session records every successful result it finishes in its recent
// list until the coordinator acknowledges it (Acks: the coordinator's job
// database holds what the result decided). A coordinator of an older
// build acknowledges nothing (Hello.acks false): then the list holds the
// results of the last recentWindow (sent, or queued to be sent, maybe
// not yet journaled by the coordinator). When the session breaks, those
// and the results of its tasks that finish afterwards go to the node's
// keeper, per job and run, for Config.KeepResults. A new session of the
// same run offers them all (Handovers, right after Welcome, before the
// first Pull); the coordinator takes those of tasks it has not decided,
// and acknowledges handed-over results by task ID once they are durable:
// the keeper forgets them. The others are offered to every new session
// until they expire: the coordinator may die again before it journals
// them. End (the job is over) drops the run's results at once.
//
// Inline output data is held in memory (the keeper's bytes are bounded by
// maxKeptBytes, the oldest results go first); outputs stored as blocks
// stay in the store, pinned by the job's pin like every output.

const (
	// recentWindow: how long a session remembers a result it finished
	// when its coordinator does not acknowledge results; the coordinator
	// journals a result well within it.
	recentWindow = 10 * time.Second
	// maxRecent bounds a session's recent list without acks, maxUnacked
	// with them (a coordinator whose journal lags far behind).
	maxRecent  = 8192
	maxUnacked = 1 << 17
	// maxRecentBytes bounds a session's recent list, maxKeptBytes the
	// kept results of all jobs together.
	maxRecentBytes = 32 << 20
	maxKeptBytes   = 64 << 20
)

// kept is a finished result of a task of a job.
type kept struct {
	taskID  string
	attempt uint32
	lease   uint64 // the session's lease ID (recent list only)
	res     *peerpb.Result
	size    int
	at      time.Time // finished (recent) or kept until (keeper)
}

func newKept(l *peerpb.Lease, res *peerpb.Result, now time.Time) kept {
	return kept{taskID: l.TaskId, attempt: l.Attempt, lease: l.LeaseId, res: res, size: proto.Size(res) + len(l.TaskId), at: now}
}

// keepable: only finished work is worth handing over.
func keepable(res *peerpb.Result) bool { return res.Outcome == report.OutcomeOK }

// recentList is a session's recent results, oldest first: the items of
// items[head:] whose res is set (an acknowledged one is cleared in place).
type recentList struct {
	// acks: the coordinator acknowledges results: they stay until it
	// does (bounded by maxUnacked and maxRecentBytes), not recentWindow.
	acks  bool
	items []kept
	head  int
	n     int // items set
	bytes int
	// at maps a lease ID to its item's position, counted from the first
	// item ever added (off: items dropped from the front of items).
	at  map[uint64]int
	off int
}

// add appends k and forgets what is beyond the list's bounds (and, without
// acks, older than recentWindow).
func (r *recentList) add(k kept) {
	if r.acks {
		if r.at == nil {
			r.at = map[uint64]int{}
		}
		r.at[k.lease] = r.off + len(r.items)
	}
	r.items = append(r.items, k)
	r.bytes += k.size
	r.n++
	most := maxRecent
	if r.acks {
		most = maxUnacked
	}
	for r.head < len(r.items)-1 {
		old := &r.items[r.head]
		if old.res != nil && !(r.n > most || r.bytes > maxRecentBytes || (!r.acks && k.at.Sub(old.at) > recentWindow)) {
			break
		}
		if old.res != nil {
			r.drop(old)
		}
		r.head++
	}
	if r.head > len(r.items)/2 && r.head > 64 { // compact now and then, not on every add
		r.off += r.head
		r.items = append(r.items[:0], r.items[r.head:]...)
		r.head = 0
	}
}

func (r *recentList) drop(k *kept) {
	r.bytes -= k.size
	r.n--
	delete(r.at, k.lease)
	*k = kept{}
}

// ack forgets the results of these leases: the coordinator's job
// database holds them.
func (r *recentList) ack(leases []uint64) {
	for _, id := range leases {
		if i, ok := r.at[id]; ok {
			r.drop(&r.items[i-r.off])
		}
	}
	for r.head < len(r.items) && r.items[r.head].res == nil {
		r.head++
	}
}

// list returns the results, oldest first.
func (r *recentList) list() []kept {
	out := make([]kept, 0, r.n)
	for _, k := range r.items[r.head:] {
		if k.res != nil {
			out = append(out, k)
		}
	}
	return out
}

// keeper holds the results of lost sessions, per job ID, for a grace time.
type keeper struct {
	grace time.Duration
	max   int // bytes

	mu    sync.Mutex
	jobs  map[string]map[string]kept // job ID -> task ID -> result
	fifo  []keptRef                  // in the order they expire
	bytes int
	now   func() time.Time

	// running counts, per job, the tasks of lost sessions that still
	// run (their results join the keeper as they finish); changed is
	// closed, and replaced, whenever a count goes down.
	running map[string]int
	changed chan struct{}
}

// keptRef names a kept result in the keeper's fifo; a ref whose result was
// replaced or dropped since is skipped.
type keptRef struct {
	job, task string
	at        time.Time
}

func newKeeper(grace time.Duration) *keeper {
	return &keeper{grace: grace, max: maxKeptBytes, jobs: map[string]map[string]kept{}, now: time.Now,
		running: map[string]int{}, changed: make(chan struct{})}
}

// orphanWait bounds how long a new session of a job waits for the tasks
// its lost sessions still run on this node before it offers their
// results: below the coordinator's hold of every lease for hand-overs
// (job.handoverHold, 2 s), so that a task that finishes meanwhile is
// handed over rather than leased again, and run twice.
const orphanWait = 1500 * time.Millisecond

// orphaned notes that n more (n < 0: fewer) tasks of job's lost
// sessions are running.
func (k *keeper) orphaned(job string, n int) {
	if k == nil || n == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.running[job] += n; k.running[job] <= 0 {
		delete(k.running, job)
	}
	if n < 0 {
		close(k.changed)
		k.changed = make(chan struct{})
	}
}

// awaitOrphans waits until no task of job's lost sessions runs here, at
// most max (or until ctx ends), and says how many still run.
func (k *keeper) awaitOrphans(ctx context.Context, job string, max time.Duration) int {
	if k == nil {
		return 0
	}
	timer := time.NewTimer(max)
	defer timer.Stop()
	for {
		k.mu.Lock()
		n, ch := k.running[job], k.changed
		k.mu.Unlock()
		if n == 0 {
			return 0
		}
		select {
		case <-ch:
		case <-timer.C:
			return n
		case <-ctx.Done():
			return n
		}
	}
}

// put keeps results of job until the grace time from now; the newest
// result of a task replaces an older one. Over the byte bound the
// results that expire first go.
func (k *keeper) put(job string, rs ...kept) {
	if k == nil || k.grace <= 0 || len(rs) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	k.expireLocked(now)
	m := k.jobs[job]
	if m == nil {
		m = map[string]kept{}
		k.jobs[job] = m
	}
	for _, r := range rs {
		if old, ok := m[r.taskID]; ok {
			k.bytes -= old.size
		}
		r.at = now.Add(k.grace)
		m[r.taskID] = r
		k.fifo = append(k.fifo, keptRef{job: job, task: r.taskID, at: r.at})
		k.bytes += r.size
	}
	for k.bytes > k.max && k.popLocked() {
	}
}

// offer returns job's kept results as Handovers messages within the
// protocol's batch bounds, and how many there are. It keeps them: they go
// to every new session until they expire.
func (k *keeper) offer(job string) ([]*peerpb.Handovers, int) {
	if k == nil {
		return nil, 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.expireLocked(k.now())
	var out []*peerpb.Handovers
	var cur *peerpb.Handovers
	size := 0
	for _, r := range k.jobs[job] {
		if cur == nil || len(cur.Handovers) >= peerpb.MaxBatch || size+r.size > peerpb.MaxBatchBytes {
			cur = &peerpb.Handovers{}
			out = append(out, cur)
			size = 0
		}
		res := proto.Clone(r.res).(*peerpb.Result)
		res.LeaseId = 0
		cur.Handovers = append(cur.Handovers, &peerpb.Handover{TaskId: r.taskID, Attempt: r.attempt, Result: res})
		size += r.size
	}
	return out, len(k.jobs[job])
}

// drop forgets job's results of these tasks (the coordinator's job
// database holds them), or all of them when tasks is nil (the job is
// over).
func (k *keeper) drop(job string, tasks []string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.jobs[job]
	if tasks == nil {
		for _, r := range m {
			k.bytes -= r.size
		}
		delete(k.jobs, job)
		return // the fifo's refs to them are skipped as they come
	}
	for _, t := range tasks {
		if r, ok := m[t]; ok {
			k.bytes -= r.size
			delete(m, t)
		}
	}
	if len(m) == 0 {
		delete(k.jobs, job)
	}
}

// count is the number of results kept for job.
func (k *keeper) count(job string) int {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.expireLocked(k.now())
	return len(k.jobs[job])
}

// expireLocked forgets the results whose grace time is over.
func (k *keeper) expireLocked(now time.Time) {
	for len(k.fifo) > 0 && !now.Before(k.fifo[0].at) {
		k.popLocked()
	}
}

// popLocked forgets the result that expires first; false if none is left.
func (k *keeper) popLocked() bool {
	for len(k.fifo) > 0 {
		ref := k.fifo[0]
		k.fifo = k.fifo[1:]
		m := k.jobs[ref.job]
		r, ok := m[ref.task]
		if !ok || !r.at.Equal(ref.at) {
			continue // replaced or dropped since
		}
		k.bytes -= r.size
		delete(m, ref.task)
		if len(m) == 0 {
			delete(k.jobs, ref.job)
		}
		return true
	}
	return false
}

// keepKey names the run a session belongs to: results are handed over
// only to a session of the same job and run (a rerun that resumes the
// same output folder), never to a fresh run of the same job elsewhere.
func keepKey(h *peerpb.Hello) string { return h.JobId + "/" + h.Run }
