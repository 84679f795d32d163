//go:build linux

package pluginhost

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// batchRun runs tasks (op params) through RunBatch as taskrun does: the
// rest again after a call that ended early, in the emptied work dir. It
// returns each task's result and how many calls it took.
func batchRun(t *testing.T, pl *Pool, timeout time.Duration, ps ...params) ([]BatchResult, int) {
	t.Helper()
	work := filepath.Join(pl.cfg.Sandbox.ReadWrite[0], "slot")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	tasks := make([]BatchTask, len(ps))
	for i, p := range ps {
		r := req("t"+string(rune('a'+i)), p)
		r.WorkDir = work
		tasks[i] = BatchTask{Ctx: context.Background(), Req: r}
	}
	out := make([]BatchResult, 0, len(ps))
	calls := 0
	alone := false
	for len(out) < len(tasks) {
		if calls > 0 { // what the tasks left, as taskrun's work func does
			os.RemoveAll(work)
			os.Mkdir(work, 0o755)
		}
		calls++
		base := len(out)
		rest := tasks[base:]
		if alone {
			rest = rest[:1]
		}
		var n int
		n, alone = pl.RunBatch(context.Background(), rest, timeout, func(i int, r BatchResult) {
			if i != len(out)-base {
				t.Errorf("result %d out of order (have %d)", base+i, len(out))
			}
			out = append(out, r)
		})
		if n != len(out)-base {
			t.Fatalf("RunBatch returned %d, reported %d", n, len(out)-base)
		}
	}
	return out, calls
}

// newBatchPool is a pool of the test binary in mode whose tasks may
// write in a work folder of their own (Sandbox.ReadWrite[0]).
func newBatchPool(t *testing.T, mode string) *Pool {
	cfg, _ := testConfig(t, mode)
	cfg.Sandbox.ReadWrite = []string{t.TempDir()}
	pl := NewPool(cfg, 1)
	t.Cleanup(func() { pl.Close() })
	return pl
}

func pidOf(t *testing.T, r BatchResult) int {
	t.Helper()
	if r.Err != nil {
		t.Fatalf("want a pid, got error %v", r.Err)
	}
	f := strings.Fields(string(r.Res.Data))
	return atoi(t, f[0])
}

// One call runs the batch; a panic, a failure and a task that honours
// its ctx past its timeout fail only themselves, and the process stays.
func TestBatchOutcomes(t *testing.T) {
	pl := newBatchPool(t, "task")
	start := time.Now()
	res, calls := batchRun(t, pl, 300*time.Millisecond,
		params{Op: "pid"},
		params{Op: "panicin", Msg: "boom"},
		params{Op: "fail", Msg: "bad input"},
		params{Op: "sleep", MS: 5000, Ctx: true},
		params{Op: "pid"},
	)
	if calls != 1 {
		t.Fatalf("%d calls, want 1", calls)
	}
	want := []string{report.OutcomeOK, report.OutcomeTaskError, report.OutcomeTaskError, report.OutcomeTimeout, report.OutcomeOK}
	for i, r := range res {
		if got := Classify(context.Background(), r.Err); got != want[i] {
			t.Errorf("task %d: outcome %s (%v), want %s", i, got, r.Err, want[i])
		}
		if r.Start.IsZero() || r.End.Before(r.Start) {
			t.Errorf("task %d: start %v end %v", i, r.Start, r.End)
		}
	}
	var te *sdk.TaskError
	if !errors.As(res[1].Err, &te) || !strings.Contains(res[1].Err.Error(), "panic: boom") {
		t.Errorf("panic: %v", res[1].Err)
	}
	if pidOf(t, res[0]) != pidOf(t, res[4]) {
		t.Error("the process did not survive the batch")
	}
	if s := pl.Stats(); s.Starts != 1 || s.Timeouts != 1 || s.TaskErrors != 2 {
		t.Errorf("stats %+v", s)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

// A task that ignores its ctx past its timeout is killed with its
// process: it alone times out, the rest run in a fresh process.
func TestBatchTimeoutKills(t *testing.T) {
	pl := newBatchPool(t, "task")
	res, calls := batchRun(t, pl, 200*time.Millisecond,
		params{Op: "pid"},
		params{Op: "sleep", MS: 5000},
		params{Op: "pid"},
		params{Op: "pid"},
	)
	if calls != 2 {
		t.Errorf("%d calls, want 2", calls)
	}
	if !errors.Is(res[1].Err, ErrTimeout) {
		t.Fatalf("task 1: %v, want a timeout", res[1].Err)
	}
	first, third := pidOf(t, res[0]), pidOf(t, res[2])
	if first == third || third != pidOf(t, res[3]) {
		t.Errorf("pids %d %d %d: want a new process after the kill", first, third, pidOf(t, res[3]))
	}
	waitDead(t, first, 5*time.Second, "the overrunning plugin")
}

// A plugin that dies mid-batch: the results already received stand, the
// task it died in is crashed (found by running the tasks not reported
// again, the first alone), the others are ok: as if unbatched.
func TestBatchPluginKilled(t *testing.T) {
	pl := newBatchPool(t, "task")
	res, _ := batchRun(t, pl, 10*time.Second,
		params{Op: "pid"},
		params{Op: "pid"},
		params{Op: "killself"},
		params{Op: "pid"},
		params{Op: "pid"},
	)
	for i, r := range res {
		want := report.OutcomeOK
		if i == 2 {
			want = report.OutcomeCrashed
		}
		if got := Classify(context.Background(), r.Err); got != want {
			t.Errorf("task %d: %s (%v), want %s", i, got, r.Err, want)
		}
	}
	if pidOf(t, res[3]) != pidOf(t, res[4]) {
		t.Error("want the tasks after the crash in one fresh process")
	}
	// Results held in the plugin died with it: for a while the pool's
	// batches send each result alone, so the next crash is pinned.
	if h := pl.hold(); h.MaxResults != 0 {
		t.Errorf("hold %+v right after a crash, want none", h)
	}
}

// Many tiny tasks run in one call, their results sent several to a
// message (SDK protocol 4) and reported one by one, in order, each with
// its own times.
func TestBatchManyHeld(t *testing.T) {
	pl := newBatchPool(t, "task")
	if h := pl.hold(); h.MaxResults < 2 {
		t.Fatalf("hold %+v, want results held", h)
	}
	ps := make([]params, 300)
	for i := range ps {
		ps[i] = params{Op: "pid"}
	}
	res, calls := batchRun(t, pl, 10*time.Second, ps...)
	if calls != 1 {
		t.Errorf("%d calls, want 1", calls)
	}
	pid := pidOf(t, res[0])
	for i, r := range res {
		if r.Err != nil || pidOf(t, r) != pid || !r.Clean {
			t.Fatalf("task %d: %v (clean %v)", i, r.Err, r.Clean)
		}
		if i > 0 && r.Start.Before(res[i-1].End) {
			t.Fatalf("task %d started at %v, before task %d ended (%v)", i, r.Start, i-1, res[i-1].End)
		}
	}
}

// A task's own ctx ending while it runs kills the process (as Run) and
// cancels that task alone.
func TestBatchTaskCanceled(t *testing.T) {
	pl := newBatchPool(t, "task")
	work := pl.cfg.Sandbox.ReadWrite[0]
	ctx, cancel := context.WithCancel(context.Background())
	h := newTestHost()
	tasks := []BatchTask{
		{Ctx: context.Background(), Req: req("a", params{Op: "pid"})},
		{Ctx: ctx, Req: req("b", params{Op: "sleep", MS: 5000}), Host: h},
		{Ctx: context.Background(), Req: req("c", params{Op: "pid"})},
	}
	for _, tk := range tasks {
		tk.Req.WorkDir = work
	}
	go func() {
		h.waitPartial(t, "pid")
		cancel()
	}()
	var got []BatchResult
	n, _ := pl.RunBatch(context.Background(), tasks, 10*time.Second, func(i int, r BatchResult) { got = append(got, r) })
	if n != 2 || len(got) != 2 {
		t.Fatalf("reported %d (%d), want 2", n, len(got))
	}
	if o := Classify(ctx, got[1].Err); o != report.OutcomeCanceled {
		t.Fatalf("task b: %s (%v), want canceled", o, got[1].Err)
	}
}

// A task that returns files, or leaves any, ends the call: the next task
// starts in an emptied folder. Tasks that leave nothing share one call.
func TestBatchWorkDir(t *testing.T) {
	pl := newBatchPool(t, "task")
	res, calls := batchRun(t, pl, 10*time.Second,
		params{Op: "empty"},
		params{Op: "empty"},
		params{Op: "write", Msg: "x"},
		params{Op: "empty"},
		params{Op: "litter"},
		params{Op: "empty"},
	)
	if calls != 3 {
		t.Errorf("%d calls, want 3", calls)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("task %d: %v", i, r.Err)
		}
	}
	for _, i := range []int{0, 1, 3, 5} {
		if f := strings.Fields(string(res[i].Res.Data)); f[1] != "0" {
			t.Errorf("task %d started in a folder of %s entries", i, f[1])
		}
	}
	if !res[0].Clean || res[2].Clean || res[4].Clean {
		t.Errorf("clean: %v %v %v", res[0].Clean, res[2].Clean, res[4].Clean)
	}
	if len(res[2].Res.Files) != 1 {
		t.Errorf("files %v", res[2].Res.Files)
	}
}

// A plugin built against SDK protocol 2 gets single Run calls.
func TestBatchOldPlugin(t *testing.T) {
	pl := newBatchPool(t, "old")
	res, calls := batchRun(t, pl, 10*time.Second, params{Op: "pid"}, params{Op: "pid"}, params{Op: "pid"})
	if calls != 3 {
		t.Errorf("%d calls, want 3 (one per task)", calls)
	}
	for i, r := range res {
		if r.Err != nil || !strings.HasSuffix(string(r.Res.Data), " t"+string(rune('a'+i))) {
			t.Errorf("task %d: %q %v", i, r.Res, r.Err)
		}
	}
}

// Callbacks reach the host of their own task.
func TestBatchCallbacks(t *testing.T) {
	pl := newBatchPool(t, "task")
	work := pl.cfg.Sandbox.ReadWrite[0]
	hosts := []*testHost{newTestHost(), newTestHost()}
	tasks := make([]BatchTask, 2)
	for i := range tasks {
		r := req("p", params{Op: "progress"})
		r.WorkDir = filepath.Clean(work)
		tasks[i] = BatchTask{Ctx: context.Background(), Req: r, Host: hosts[i]}
	}
	n, _ := pl.RunBatch(context.Background(), tasks, time.Second, func(i int, r BatchResult) {
		if r.Err != nil {
			t.Errorf("task %d: %v", i, r.Err)
		}
	})
	if n != 2 {
		t.Fatalf("reported %d", n)
	}
	for i, h := range hosts {
		if len(h.progress) != 1 || len(h.partials) != 1 {
			t.Errorf("host %d: progress %q partials %q", i, h.progress, h.partials)
		}
	}
}

// One task alone is a single Run; its start and end are the plugin's
// (SDK protocol 4): within the call, around the task's own 20 ms.
func TestBatchOfOne(t *testing.T) {
	pl := newBatchPool(t, "task")
	runPID(t, pl) // warm: the start is not in the call
	before := time.Now()
	res, calls := batchRun(t, pl, 10*time.Second, params{Op: "pid", MS: 20})
	after := time.Now()
	if calls != 1 || res[0].Err != nil {
		t.Fatalf("%d calls, %v", calls, res[0].Err)
	}
	r := res[0]
	if d := r.End.Sub(r.Start); d < 20*time.Millisecond || r.Start.Before(before) || r.End.After(after) {
		t.Errorf("ran from %v to %v (%v), called from %v to %v", r.Start, r.End, d, before, after)
	}
}

// A task's result comes while the plugin already runs the next task of
// its batch: what the next task started is its own, not left running by
// the task that ended, and lives on (before, the host killed every
// process but the plugin's at each result, and the second task's child
// with them).
func TestBatchNextTasksChildLives(t *testing.T) {
	pl := newBatchPool(t, "task")
	if st := sandbox.Cgroups(); st.Version == 0 {
		t.Skipf("no cgroups here (%s): nothing kills a task's leftovers", st.Reason)
	}
	res, calls := batchRun(t, pl, 10*time.Second,
		params{Op: "pid"},
		params{Op: "waitchild", MS: 300},
		params{Op: "pid"},
	)
	if calls != 1 {
		t.Errorf("%d calls, want 1", calls)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Errorf("task %d: %v", i, r.Err)
		}
	}
}

// What a batch's task leaves running is gone when the call ends.
func TestBatchLeftoversGoAtTheEnd(t *testing.T) {
	pl := newBatchPool(t, "task")
	if st := sandbox.Cgroups(); st.Version == 0 {
		t.Skipf("no cgroups here (%s): nothing kills a task's leftovers", st.Reason)
	}
	work := filepath.Join(pl.cfg.Sandbox.ReadWrite[0], "slot")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	host := newTestHost()
	var tasks []BatchTask
	for i, p := range []params{{Op: "sleep", Child: true}, {Op: "pid"}} {
		r := req("t"+strconv.Itoa(i), p)
		r.WorkDir = work
		tasks = append(tasks, BatchTask{Ctx: context.Background(), Req: r, Host: host})
	}
	n, _ := pl.RunBatch(context.Background(), tasks, 10*time.Second, func(i int, r BatchResult) {
		if r.Err != nil {
			t.Errorf("task %d: %v", i, r.Err)
		}
	})
	if n != 2 {
		t.Fatalf("%d tasks reported, want 2", n)
	}
	pid := host.waitPartial(t, "child")
	waitDead(t, pid, 5*time.Second, "the child left by the batch's first task")
}
