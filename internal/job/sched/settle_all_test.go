package sched

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/p2pc/p2pc/internal/report"
)

// countingApplier counts the Applier's calls and the decisions they carry.
type countingApplier struct {
	Applier
	calls, accepts atomic.Int64
}

func (c *countingApplier) Apply(ds []Decision) []error {
	c.calls.Add(1)
	for _, d := range ds {
		if _, ok := d.(Accept); ok {
			c.accepts.Add(1)
		}
	}
	return c.Applier.Apply(ds)
}

// TestFinishAllOneBatch: the results of a peer's batch, settled together
// (FinishAll), decide every task as Finish would each (a failed one
// failed), and reach the Applier as one batch of decisions, not one per
// result.
func TestFinishAllOneBatch(t *testing.T) {
	const n = 40
	f := newFixture(t, n, Config{Verify: verify(1, 1, 1)})
	c := &countingApplier{Applier: f.env}
	f.q.apply = c
	var ls []*Lease
	var rs []Result
	for range n {
		l := f.take(t, "p")
		ls = append(ls, l)
		res := Result{Outcome: report.OutcomeOK, Digest: dg(l.TaskID), Inline: true, Data: []byte("out " + l.TaskID), Files: []string{"data"}}
		if l.Task == 7 {
			res = Result{Outcome: report.OutcomeTaskError, Err: fmt.Errorf("task 7 fails")}
		}
		rs = append(rs, res)
	}
	calls := c.calls.Load()
	f.q.FinishAll(ls, rs)
	if got := c.calls.Load() - calls; got > 2 {
		t.Errorf("FinishAll of %d results made %d Applier calls, want at most 2 (the decisions, then the placed outputs')", n, got)
	}
	if got := c.accepts.Load(); got != n-1 {
		t.Errorf("%d outputs accepted, want %d", got, n-1)
	}
	for i := range n {
		want := report.TaskDone
		if i == 7 {
			want = report.TaskFailed
		}
		if got := f.rep.Tasks[i].State; got != want {
			t.Errorf("task %d is %s, want %s", i, got, want)
		}
		if i != 7 && f.env.placed[fmt.Sprintf("t%d", i)] != fmt.Sprintf("inline:out t%d", i) {
			t.Errorf("task %d's output placed as %q", i, f.env.placed[fmt.Sprintf("t%d", i)])
		}
	}
	f.waitDone(t)
}
