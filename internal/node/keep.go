package node

import (
	"slices"
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
// first Pull), names the tasks still running (Welcome.running: the
// keeper's orphans) and hands each over as it ends, ok or not (watch);
// the coordinator takes those of tasks it has not decided,
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

	mu    sync.Mutex                 // a leaf; taken under session.mu too
	jobs  map[string]map[string]kept // job ID -> task ID -> result
	fifo  []keptRef                  // in the order they expire
	bytes int
	now   func() time.Time

	// running: per job, the tasks of lost sessions that still run (their
	// results join the keeper as they finish), by orphan ID; watchers:
	// the new sessions of the job that announced them (watch).
	running    map[string]map[uint64]orphan
	nextOrphan uint64
	watchers   map[string][]*orphanWatch
	// sessions: per job and run, its sessions open on this node (join).
	sessions map[string][]*session
}

// keptRef names a kept result in the keeper's fifo; a ref whose result was
// replaced or dropped since is skipped.
type keptRef struct {
	job, task string
	at        time.Time
}

func newKeeper(grace time.Duration) *keeper {
	return &keeper{grace: grace, max: maxKeptBytes, jobs: map[string]map[string]kept{}, now: time.Now,
		running: map[string]map[uint64]orphan{}, watchers: map[string][]*orphanWatch{}, sessions: map[string][]*session{}}
}

// orphan is a task of a lost session of a job that still runs here.
type orphan struct {
	taskID  string
	attempt uint32
	took    time.Time // when the lost session took the lease
}

// orphanWatch is a new session's view of the orphans that ran when it
// started (watch): each one's end comes on ch (buffered for all of them).
type orphanWatch struct {
	ids map[uint64]bool
	ch  chan *peerpb.Handover
}

// addOrphan notes that a task of job's lost session runs on; it returns
// the ID that orphanEnded takes.
func (k *keeper) addOrphan(job string, o orphan) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.nextOrphan++
	m := k.running[job]
	if m == nil {
		m = map[uint64]orphan{}
		k.running[job] = m
	}
	m[k.nextOrphan] = o
	return k.nextOrphan
}

// orphanEnded: orphan id of job ended with res. A successful result is
// kept (put); the sessions that announced the orphan running (watch) get
// its end to hand over, whatever its outcome.
func (k *keeper) orphanEnded(job string, id uint64, l *peerpb.Lease, res *peerpb.Result, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if keepable(res) { // kept before it stops running: watch sees one or the other
		k.putLocked(job, newKept(l, res, now))
	}
	o, ok := k.running[job][id]
	if ok {
		delete(k.running[job], id)
		if len(k.running[job]) == 0 {
			delete(k.running, job)
		}
	}
	var h *peerpb.Handover
	for _, w := range k.watchers[job] {
		if !w.ids[id] {
			continue
		}
		if h == nil {
			r := proto.Clone(res).(*peerpb.Result)
			r.LeaseId = 0
			h = &peerpb.Handover{TaskId: o.taskID, Attempt: o.attempt, Result: r}
		}
		delete(w.ids, id)
		w.ch <- h // never blocks: buffered for every ID it watches
	}
}

// watch returns, at one instant, job's kept results as Handovers messages
// (within the protocol's batch bounds) and how many there are, and the
// tasks of its lost sessions still running, whose ends come on the
// watch's channel until unwatch. The kept results stay: they go to every
// new session until acknowledged or expired.
func (k *keeper) watch(job string) (msgs []*peerpb.Handovers, count int, running []*peerpb.Orphan, w *orphanWatch) {
	k.mu.Lock()
	defer k.mu.Unlock()
	msgs, count = k.offerLocked(job)
	w = &orphanWatch{ids: map[uint64]bool{}, ch: make(chan *peerpb.Handover, len(k.running[job]))}
	for id, o := range k.running[job] {
		w.ids[id] = true
		p := &peerpb.Orphan{TaskId: o.taskID, Attempt: o.attempt}
		if !o.took.IsZero() {
			p.StartedUnixNano = o.took.UnixNano()
		}
		running = append(running, p)
	}
	if len(w.ids) > 0 {
		k.watchers[job] = append(k.watchers[job], w)
	}
	return msgs, count, running, w
}

// join registers s as a session of the run key and returns the run's
// sessions that were open here before it.
func (k *keeper) join(key string, s *session) []*session {
	k.mu.Lock()
	defer k.mu.Unlock()
	older := slices.Clone(k.sessions[key])
	k.sessions[key] = append(k.sessions[key], s)
	return older
}

// leave forgets s (join).
func (k *keeper) leave(key string, s *session) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sessions[key] = slices.DeleteFunc(k.sessions[key], func(x *session) bool { return x == s })
	if len(k.sessions[key]) == 0 {
		delete(k.sessions, key)
	}
}

// unwatch ends w (its session ended).
func (k *keeper) unwatch(job string, w *orphanWatch) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.watchers[job] = slices.DeleteFunc(k.watchers[job], func(x *orphanWatch) bool { return x == w })
	if len(k.watchers[job]) == 0 {
		delete(k.watchers, job)
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
	k.putLocked(job, rs...)
}

func (k *keeper) putLocked(job string, rs ...kept) {
	if k.grace <= 0 {
		return
	}
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

// offerLocked returns job's kept results as Handovers messages within
// the protocol's batch bounds, and how many there are.
func (k *keeper) offerLocked(job string) ([]*peerpb.Handovers, int) {
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
