package node

import (
	"slices"
	"time"

	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/trust"
)

// maxServedEnded bounds the jobs whose sessions ended that Served still
// lists (the newest are kept).
const maxServedEnded = 8

// ServedJob is a job this node serves, or served lately, for one
// coordinator: what a watcher of the node (p2pc join --ui) shows.
type ServedJob struct {
	JobID       string
	JobName     string
	Coordinator string // the name its Hello gave
	// CoordinatorID is the node ID its TLS handshake proved.
	CoordinatorID string
	// Since: its first session here; Ended: when its last one ended
	// (zero while one is open).
	Since, Ended time.Time
	Sessions     int // open now
	// Running and Queued are its leases running now and waiting for a
	// slot; Done and Failed its attempts that ended here with a result,
	// or with a failure (canceled and handed back ones are neither).
	Running, Queued int
	Done, Failed    int
	// CPU is the CPU time the job's live plugin processes (and what
	// they started) have used; Memory the bytes they hold resident now.
	CPU    time.Duration
	Memory int64
}

type servedKey struct{ job, coord string }

// serveStart notes a session of hello's job for coordinator coord.
func (n *Node) serveStart(h *peerpb.Hello, coord trust.NodeID) *ServedJob {
	k := servedKey{h.JobId, coord.String()}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.served == nil {
		n.served = map[servedKey]*ServedJob{}
	}
	j := n.served[k]
	if j == nil {
		j = &ServedJob{JobID: h.JobId, CoordinatorID: k.coord, Since: time.Now()}
		n.served[k] = j
	}
	j.JobName, j.Coordinator = h.JobName, h.Coordinator
	j.Sessions++
	j.Ended = time.Time{}
	return j
}

// serveEnd notes the end of a session serveStart noted.
func (n *Node) serveEnd(j *ServedJob) {
	n.mu.Lock()
	defer n.mu.Unlock()
	j.Sessions--
	if j.Sessions > 0 {
		return
	}
	j.Ended = time.Now()
	var ended []servedKey
	for k, x := range n.served {
		if x.Sessions == 0 {
			ended = append(ended, k)
		}
	}
	if len(ended) <= maxServedEnded {
		return
	}
	slices.SortFunc(ended, func(a, b servedKey) int { return n.served[b].Ended.Compare(n.served[a].Ended) })
	for _, k := range ended[maxServedEnded:] {
		delete(n.served, k)
	}
}

// serveCount counts an attempt of j that ended here with outcome.
func (n *Node) serveCount(j *ServedJob, outcome string) {
	if j == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	switch outcome {
	case report.OutcomeOK:
		j.Done++
		n.stats.Done++
	case report.OutcomeCanceled, report.OutcomeLost:
	default:
		j.Failed++
	}
}

// Served lists the jobs this node serves, and those it served lately,
// newest first, with their leases running and queued now and the CPU
// and memory of their plugin processes.
func (n *Node) Served() []ServedJob {
	type load struct{ running, queued int }
	loads := map[servedKey]load{}
	n.sched.mu.Lock()
	for _, s := range n.sched.sessions {
		if s.served == nil {
			continue
		}
		k := servedKey{s.served.JobID, s.served.CoordinatorID}
		l := loads[k]
		l.running += s.runningTasks
		l.queued += len(s.queue)
		loads[k] = l
	}
	n.sched.mu.Unlock()
	n.mu.Lock()
	out := make([]ServedJob, 0, len(n.served))
	for k, j := range n.served {
		x := *j
		x.Running, x.Queued = loads[k].running, loads[k].queued
		out = append(out, x)
	}
	pids := map[string][]int{}
	for k, p := range n.pools {
		pids[k.job] = append(pids[k.job], p.Pids()...)
	}
	n.mu.Unlock()
	for i := range out {
		out[i].CPU, out[i].Memory = treeUsage(pids[out[i].JobID])
	}
	slices.SortFunc(out, func(a, b ServedJob) int { return b.Since.Compare(a.Since) })
	return out
}
