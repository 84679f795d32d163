package job

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// The job's "virtual computer" (package vc) holds the state tasks share;
// every Host call of a task, local or remote, ends up there through a
// leaseHost.

// Limits of the partial results kept in the report.
const (
	maxPartials      = 100 // partial results kept per task in the report
	maxPartialReport = 4 << 10
)

// leaseHost is the Host that a lease's task sees on the coordinator's
// side: local slots use it directly, remote peers through HostCall.
type leaseHost struct {
	r *runner
	l *sched.Lease
}

var _ sdk.Host = (*leaseHost)(nil)

func (h *leaseHost) Progress(_ context.Context, fraction float64, note string) error {
	h.r.opts.Events.TaskProgress(h.l.TaskID, fraction, note)
	return nil
}

func (h *leaseHost) Partial(_ context.Context, data []byte) error {
	h.r.opts.Events.TaskPartial(h.l.TaskID, data)
	h.r.addPartial(h.l, data)
	return nil
}

func (h *leaseHost) Send(_ context.Context, to string, data []byte) error {
	return h.r.vc.Send(h.l.VC, to, data)
}

func (h *leaseHost) Recv(ctx context.Context) (sdk.Message, error) { return h.r.vc.Recv(ctx, h.l.VC) }

func (h *leaseHost) Load(_ context.Context, key string) (sdk.Global, error) {
	return h.r.vc.Load(h.l.VC, key)
}

func (h *leaseHost) Store(_ context.Context, key string, value []byte) (sdk.Global, error) {
	return h.r.vc.Store(h.l.VC, key, value)
}

func (h *leaseHost) CompareAndSwap(_ context.Context, key string, version uint64, value []byte) (bool, sdk.Global, error) {
	return h.r.vc.CompareAndSwap(h.l.VC, key, version, value)
}

func (h *leaseHost) Checkpoint(ctx context.Context, state []byte) error {
	if err := h.r.vc.Checkpoint(ctx, h.l.VC, state); err != nil {
		return err
	}
	h.r.mu.Lock()
	h.r.recs.Task(h.l.Task).Checkpoints++
	h.r.touchLocked(h.l.Task)
	h.r.mu.Unlock()
	return nil
}

func (h *leaseHost) Resume(context.Context) ([]byte, bool, error) {
	state, ok := h.r.vc.Resume(h.l.VC)
	return state, ok, nil
}

// addPartial keeps a task's partial result in the report (the last
// maxPartials, each cut to maxPartialReport bytes).
func (r *runner) addPartial(l *sched.Lease, data []byte) {
	p := report.Partial{Time: time.Now().UTC(), Peer: l.Peer}
	if len(data) > maxPartialReport {
		data, p.Truncated = data[:maxPartialReport], true
	}
	if utf8.Valid(data) {
		p.Text = string(data)
	} else {
		p.Bytes = data
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.recs.Task(l.Task)
	t.Partials = append(t.Partials, p)
	if len(t.Partials) > maxPartials {
		t.Partials = t.Partials[len(t.Partials)-maxPartials:]
	}
	r.touchLocked(l.Task)
}
