package sdktest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
)

func recvN(t *testing.T, h sdk.Host, n int) []sdk.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var ms []sdk.Message
	for range n {
		m, err := h.Recv(ctx)
		if err != nil {
			t.Fatalf("recv after %d messages: %v", len(ms), err)
		}
		ms = append(ms, m)
	}
	return ms
}

func TestJobMessages(t *testing.T) {
	ctx := context.Background()
	j := NewJob()
	a, b, c := j.Host("a"), j.Host("b"), j.Host("c")
	// Interleave two senders; each one's messages must keep their order.
	for i := range 3 {
		if err := a.Send(ctx, "c", []byte(fmt.Sprint("a", i))); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(ctx, "c", []byte(fmt.Sprint("b", i))); err != nil {
			t.Fatal(err)
		}
	}
	ms := recvN(t, c, 6)
	var got []string
	for i, m := range ms {
		if m.Seq != uint64(i+1) {
			t.Errorf("message %d has Seq %d", i, m.Seq)
		}
		if string(m.Data[:1]) != m.From {
			t.Errorf("message %q claims to be from %q", m.Data, m.From)
		}
		got = append(got, string(m.Data))
	}
	if s := strings.Join(got, " "); s != "a0 b0 a1 b1 a2 b2" {
		t.Errorf("received %s", s)
	}

	// Recv waits for a message sent later (once the receiver is blocked:
	// synctest.Wait), and gives up with its context.
	synctest.Test(t, func(t *testing.T) {
		j := NewJob()
		a, c := j.Host("a"), j.Host("c")
		done := make(chan sdk.Message, 1)
		go func() {
			m, err := a.Recv(ctx)
			if err != nil {
				t.Error(err)
			}
			done <- m
		}()
		synctest.Wait()
		select {
		case m := <-done:
			t.Fatalf("Recv returned %+v before anything was sent", m)
		default:
		}
		if err := c.Send(ctx, "a", []byte("late")); err != nil {
			t.Fatal(err)
		}
		if m := <-done; string(m.Data) != "late" || m.From != "c" || m.Seq != 1 {
			t.Errorf("late message = %+v", m)
		}
	})
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := a.Recv(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("recv with nothing to receive: %v", err)
	}

	// A message to a task that never ran waits for it; the sender's buffer
	// is its own.
	buf := []byte("early")
	if err := a.Send(ctx, "d", buf); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X'
	if m := recvN(t, j.Host("d"), 1)[0]; string(m.Data) != "early" {
		t.Errorf("message to a task started later = %q", m.Data)
	}

	if err := a.Send(ctx, "", nil); err == nil {
		t.Error("send to no task: no error")
	}
	if err := a.Send(ctx, "b", make([]byte, sdk.MaxMessageSize+1)); err == nil {
		t.Error("oversized message: no error")
	}
}

func TestJobGlobals(t *testing.T) {
	ctx := context.Background()
	j := NewJob()
	h := j.Host("t")
	g, err := h.Load(ctx, "k")
	if err != nil || g.Version != 0 || g.Value != nil {
		t.Fatalf("load of a new key = %+v, %v", g, err)
	}
	if g, err = h.Store(ctx, "k", []byte("one")); err != nil || g.Version != 1 || string(g.Value) != "one" {
		t.Fatalf("store = %+v, %v", g, err)
	}
	if g, err = h.Store(ctx, "k", []byte("two")); err != nil || g.Version != 2 {
		t.Fatalf("second store = %+v, %v", g, err)
	}
	ok, cur, err := h.CompareAndSwap(ctx, "k", 1, []byte("stale"))
	if err != nil || ok || cur.Version != 2 || string(cur.Value) != "two" {
		t.Errorf("swap at a stale version = %v %+v %v", ok, cur, err)
	}
	ok, cur, err = h.CompareAndSwap(ctx, "k", 2, []byte("three"))
	if err != nil || !ok || cur.Version != 3 || string(cur.Value) != "three" {
		t.Errorf("swap at the current version = %v %+v %v", ok, cur, err)
	}
	ok, cur, err = h.CompareAndSwap(ctx, "new", 0, []byte("x"))
	if err != nil || !ok || cur.Version != 1 {
		t.Errorf("swap creating a key = %v %+v %v", ok, cur, err)
	}
	// Another task sees the same variables.
	if g := j.Global("k"); g.Version != 3 || string(g.Value) != "three" {
		t.Errorf("job's view = %+v", g)
	}
	if g, _ := j.Host("u").Load(ctx, "new"); g.Version != 1 || string(g.Value) != "x" {
		t.Errorf("other task's view = %+v", g)
	}
	if keys := fmt.Sprint(j.Keys()); keys != "[k new]" {
		t.Errorf("keys = %s", keys)
	}
	for _, key := range []string{"", strings.Repeat("k", 257), "\xff"} {
		if _, err := h.Store(ctx, key, nil); err == nil {
			t.Errorf("store with key %q: no error", key)
		}
	}
	if _, err := h.Store(ctx, "big", make([]byte, sdk.MaxGlobalSize+1)); err == nil {
		t.Error("oversized store: no error")
	}
	if _, _, err := h.CompareAndSwap(ctx, "big", 0, make([]byte, sdk.MaxGlobalSize+1)); err == nil {
		t.Error("oversized swap: no error")
	}
	if g := j.Global("big"); g.Version != 0 {
		t.Errorf("oversized value stored: %+v", g)
	}
}

// TestJobUpdateConcurrent is the linearizability check: concurrent
// read-modify-write loops through sdk.Update lose no increment.
func TestJobUpdateConcurrent(t *testing.T) {
	const workers, each = 8, 1000
	j := NewJob()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range workers {
		h := j.Host(fmt.Sprint("w", w))
		wg.Go(func() {
			for range each {
				_, err := sdk.Update(ctx, h, "counter", func(cur []byte) ([]byte, error) {
					n := uint64(0)
					if len(cur) == 8 {
						n = binary.BigEndian.Uint64(cur)
					}
					return binary.BigEndian.AppendUint64(nil, n+1), nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	g := j.Global("counter")
	if n := binary.BigEndian.Uint64(g.Value); n != workers*each {
		t.Errorf("counter = %d, want %d", n, workers*each)
	}
	if g.Version != workers*each {
		t.Errorf("version = %d, want %d (one per successful swap)", g.Version, workers*each)
	}
}

func TestJobCheckpointResume(t *testing.T) {
	ctx := context.Background()
	j := NewJob()
	first := j.Host("t")
	if _, ok, err := first.Resume(ctx); ok || err != nil {
		t.Fatalf("resume before any checkpoint: %v, %v", ok, err)
	}
	sender := j.Host("s")
	for i := range 4 {
		if err := sender.Send(ctx, "t", []byte{byte('0' + i)}); err != nil {
			t.Fatal(err)
		}
	}
	recvN(t, first, 2) // 0 and 1, then a checkpoint
	state := []byte("state-1")
	if err := first.Checkpoint(ctx, state); err != nil {
		t.Fatal(err)
	}
	state[0] = 'X'
	recvN(t, first, 1) // 2, received after the checkpoint: lost with the peer
	if s, ok := j.Checkpoint("t"); !ok || string(s) != "state-1" {
		t.Errorf("job's view of the checkpoint = %q, %v", s, ok)
	}

	// The task is started again: its state comes back, message 2 is
	// delivered again, and the old incarnation is fenced off.
	second := j.Host("t")
	s, ok, err := second.Resume(ctx)
	if err != nil || !ok || string(s) != "state-1" {
		t.Fatalf("resume = %q, %v, %v", s, ok, err)
	}
	ms := recvN(t, second, 2)
	if string(ms[0].Data) != "2" || ms[0].Seq != 3 || string(ms[1].Data) != "3" || ms[1].Seq != 4 {
		t.Errorf("after resume received %q (Seq %d), %q (Seq %d), want 2 (3) and 3 (4)", ms[0].Data, ms[0].Seq, ms[1].Data, ms[1].Seq)
	}
	if _, err := first.Recv(ctx); !errors.Is(err, ErrSuperseded) {
		t.Errorf("old incarnation's recv: %v", err)
	}
	if err := first.Checkpoint(ctx, nil); !errors.Is(err, ErrSuperseded) {
		t.Errorf("old incarnation's checkpoint: %v", err)
	}
	if _, err := first.Store(ctx, "k", nil); !errors.Is(err, ErrSuperseded) {
		t.Errorf("old incarnation's store: %v", err)
	}
	if err := first.Progress(ctx, 0.5, ""); err != nil {
		t.Errorf("old incarnation's progress: %v", err)
	}
	if err := second.Checkpoint(ctx, make([]byte, sdk.MaxCheckpointSize+1)); err == nil {
		t.Error("oversized checkpoint: no error")
	}

	// An incarnation that does not resume starts from scratch: every
	// message again.
	third := j.Host("t")
	if ms := recvN(t, third, 4); string(ms[0].Data) != "0" || ms[0].Seq != 1 {
		t.Errorf("without resume the first message is %q (Seq %d)", ms[0].Data, ms[0].Seq)
	}
}

// TestJobOpLog: a task started again replays its shared-state operations:
// it gets the recorded results, nothing is applied twice, and what it
// does beyond (or differently from) the log is applied.
func TestJobOpLog(t *testing.T) {
	ctx := context.Background()
	j := NewJob()
	first := j.Host("t")
	first.Store(ctx, "a", []byte("1"))
	first.Send(ctx, "u", []byte("hello"))
	if err := first.Checkpoint(ctx, []byte("after 2 ops")); err != nil {
		t.Fatal(err)
	}
	_, err := sdk.Update(ctx, first, "n", func(cur []byte) ([]byte, error) { return append(cur, 'x'), nil })
	if err != nil {
		t.Fatal(err)
	}
	first.Load(ctx, "a")

	// From the start: the same operations replay.
	again := j.Host("t")
	if g, _ := again.Store(ctx, "a", []byte("1")); g.Version != 1 {
		t.Errorf("replayed store = %+v, want the recorded version 1", g)
	}
	again.Send(ctx, "u", []byte("hello"))
	if g := j.Global("a"); g.Version != 1 {
		t.Errorf("a replayed store was applied again: %+v", g)
	}
	u := j.Host("u")
	if ms := recvN(t, u, 1); string(ms[0].Data) != "hello" {
		t.Fatal(ms)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if m, err := u.Recv(short); err == nil {
		t.Errorf("a replayed send was delivered again: %+v", m)
	}

	// From the checkpoint: the update after it replays, once.
	resumed := j.Host("t")
	if _, ok, _ := resumed.Resume(ctx); !ok {
		t.Fatal("no checkpoint")
	}
	g, err := sdk.Update(ctx, resumed, "n", func(cur []byte) ([]byte, error) { return append(cur, 'x'), nil })
	if err != nil || string(g.Value) != "x" || j.Global("n").Version != 1 {
		t.Errorf("update after resume = %+v, %v; variable %+v", g, err, j.Global("n"))
	}
	// Diverging: a store where the log has a load is applied live.
	if g, _ := resumed.Store(ctx, "a", []byte("2")); g.Version != 2 || j.Global("a").Version != 2 {
		t.Errorf("diverged store = %+v", g)
	}
	if g, _ := resumed.Load(ctx, "a"); string(g.Value) != "2" {
		t.Errorf("load after divergence = %+v", g)
	}
}

func TestJobCanceledCalls(t *testing.T) {
	j := NewJob()
	h := j.Host("t")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]error{
		"send":       h.Send(ctx, "t", nil),
		"checkpoint": h.Checkpoint(ctx, nil),
	}
	_, calls["recv"] = h.Recv(ctx)
	_, calls["load"] = h.Load(ctx, "k")
	_, calls["store"] = h.Store(ctx, "k", nil)
	_, _, calls["swap"] = h.CompareAndSwap(ctx, "k", 0, nil)
	_, _, calls["resume"] = h.Resume(ctx)
	for name, err := range calls {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s after cancel: %v", name, err)
		}
	}
	if len(j.Keys()) != 0 {
		t.Errorf("a cancelled call stored: %v", j.Keys())
	}
}

// ring passes a token around n tasks named "0".."n-1", laps times; task 0
// starts it. Each task returns how many tokens it saw.
type ring struct{ n, laps int }

func (r ring) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	me, err := strconv.Atoi(req.TaskID)
	if err != nil {
		return nil, err
	}
	next := strconv.Itoa((me + 1) % r.n)
	if me == 0 {
		if err := host.Send(ctx, next, []byte("1")); err != nil {
			return nil, err
		}
	}
	seen := 0
	for seen < r.laps {
		m, err := host.Recv(ctx)
		if err != nil {
			return nil, err
		}
		seen++
		hops, _ := strconv.Atoi(string(m.Data))
		host.Progress(ctx, float64(seen)/float64(r.laps), "")
		if me == 0 && seen == r.laps {
			break // the token has been round laps times
		}
		if err := host.Send(ctx, next, []byte(strconv.Itoa(hops+1))); err != nil {
			return nil, err
		}
	}
	if _, err := sdk.Update(ctx, host, "done", func(cur []byte) ([]byte, error) { return append(cur, req.TaskID...), nil }); err != nil {
		return nil, err
	}
	return &sdk.Result{Data: fmt.Appendf(nil, "%s saw %d", req.JobID, seen)}, nil
}

func TestRunTasks(t *testing.T) {
	const n, laps = 5, 20
	j := NewJob()
	var reqs []*sdk.Request
	for i := range n {
		reqs = append(reqs, &sdk.Request{TaskID: strconv.Itoa(i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	outs, err := j.RunTasks(ctx, ring{n, laps}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, out := range outs {
		defer out.Cleanup()
		if got := string(out.Files[sdk.DataFile]); got != fmt.Sprintf("sdktest saw %d", laps) {
			t.Errorf("task %d: %q", i, got)
		}
		if len(out.Progress) != laps || out.Progress[laps-1] != 1 {
			t.Errorf("task %d: progress %v", i, out.Progress)
		}
	}
	if g := j.Global("done"); len(g.Value) != n || g.Version != n {
		t.Errorf("done = %+v", g)
	}
}

func TestRunTasksFailure(t *testing.T) {
	boom := errors.New("boom")
	task := taskFunc(func(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
		if req.TaskID == "bad" {
			return nil, boom
		}
		_, err := host.Recv(ctx) // nobody sends: wait for the cancellation
		return nil, err
	})
	j := NewJob()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	outs, err := j.RunTasks(ctx, task, []*sdk.Request{{TaskID: "a"}, {TaskID: "bad"}, {TaskID: "b"}})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "task bad") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("RunTasks took %v: the other tasks were not cancelled", d)
	}
	if len(outs) != 3 || outs[0] == nil || outs[0].Result != nil {
		t.Errorf("outcomes = %+v", outs)
	}

	for _, reqs := range [][]*sdk.Request{{{TaskID: "x"}, {TaskID: "x"}}, {{}}} {
		if _, err := j.RunTasks(ctx, task, reqs); err == nil {
			t.Errorf("requests %+v: no error", reqs)
		}
	}
}
