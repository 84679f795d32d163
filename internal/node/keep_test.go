package node

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/report"
)

func keptOf(task string, data int, at time.Time) kept {
	l := &peerpb.Lease{LeaseId: 7, TaskId: task, Attempt: 1}
	res := &peerpb.Result{LeaseId: 7, Outcome: report.OutcomeOK, Outputs: []*peerpb.Output{{Name: "data", Data: make([]byte, data), Size: int64(data)}}}
	return newKept(l, res, at)
}

func TestKeeper(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := newKeeper(time.Minute)
	k.now = func() time.Time { return now }

	k.put("j1", keptOf("a", 10, now), keptOf("b", 10, now))
	k.put("j2", keptOf("a", 10, now))
	if k.count("j1") != 2 || k.count("j2") != 1 {
		t.Fatalf("kept %d and %d, want 2 and 1", k.count("j1"), k.count("j2"))
	}
	// Offered, and still kept for the next session; the lease ID is not
	// the new session's.
	for range 2 {
		msgs, _ := offer(k, "j1")
		if len(msgs) != 1 || len(msgs[0].Handovers) != 2 {
			t.Fatalf("offer: %v", msgs)
		}
		for _, h := range msgs[0].Handovers {
			if h.Result.LeaseId != 0 || h.Attempt != 1 || (h.TaskId != "a" && h.TaskId != "b") {
				t.Fatalf("handover %+v", h)
			}
		}
	}
	// A newer result of a task replaces the older and lives longer.
	now = now.Add(30 * time.Second)
	k.put("j1", keptOf("a", 20, now))
	now = now.Add(40 * time.Second) // j1/b and j2/a expire
	if k.count("j1") != 1 || k.count("j2") != 0 {
		t.Fatalf("after 70s: kept %d and %d, want 1 and 0", k.count("j1"), k.count("j2"))
	}
	if msgs, _ := offer(k, "j1"); msgs[0].Handovers[0].Result.Outputs[0].Size != 20 {
		t.Fatalf("kept the older result of a")
	}
	now = now.Add(time.Minute)
	if k.count("j1") != 0 || k.bytes != 0 || len(k.jobs) != 0 {
		t.Fatalf("after expiry: %d kept, %d bytes, %d jobs", k.count("j1"), k.bytes, len(k.jobs))
	}

	// Over the byte bound the oldest go; offers respect the batch bounds.
	k.max = 100 << 10
	for i := range 300 {
		k.put("j", keptOf(fmt.Sprint(i), 1000, now))
		now = now.Add(time.Millisecond)
	}
	if n := k.count("j"); n >= 300 || n < 50 || k.bytes > k.max {
		t.Fatalf("bounded: %d kept, %d bytes (max %d)", n, k.bytes, k.max)
	}
	if _, ok := k.jobs["j"]["0"]; ok {
		t.Fatal("the oldest result survived the bound")
	}
	k.max = maxKeptBytes
	for i := range 600 {
		k.put("big", keptOf(fmt.Sprint(i), 10, now))
	}
	total := 0
	msgs, n := offer(k, "big")
	if n != 600 {
		t.Fatalf("offer counts %d", n)
	}
	for _, m := range msgs {
		if len(m.Handovers) > peerpb.MaxBatch {
			t.Fatalf("%d handovers in one message", len(m.Handovers))
		}
		total += len(m.Handovers)
	}
	if total != 600 {
		t.Fatalf("offered %d of 600", total)
	}
	// Off: nothing is kept.
	off := newKeeper(0)
	off.put("j", keptOf("a", 1, now))
	if off.count("j") != 0 {
		t.Fatal("kept with KeepResults 0")
	}
}

func TestRecentList(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var r recentList
	for i := range 5 {
		r.add(keptOf(fmt.Sprint(i), 1, now.Add(time.Duration(i)*4*time.Second)))
	}
	// At 16s the results of 0s and 4s are older than the window.
	if l := r.list(); len(l) != 3 || l[0].taskID != "2" {
		t.Fatalf("recent: %d items, first %s", len(l), l[0].taskID)
	}
	// Bounded by count, cheaply: the list does not grow past its bound.
	var big recentList
	for i := range 3 * maxRecent {
		big.add(keptOf(fmt.Sprint(i), 1, now))
	}
	if l := big.list(); len(l) != maxRecent || l[0].taskID != fmt.Sprint(2*maxRecent) || cap(big.items) > 4*maxRecent {
		t.Fatalf("recent: %d items (cap %d), first %s", len(l), cap(big.items), l[0].taskID)
	}
}

// TestRecentListAcks: with a coordinator that acknowledges results, a
// result stays (however old) until its lease is acknowledged; acks of
// unknown leases change nothing; the count bound still holds.
func TestRecentListAcks(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := recentList{acks: true}
	for i := range 200 {
		k := keptOf(fmt.Sprint(i), 10, now.Add(time.Duration(i)*time.Second))
		k.lease = uint64(i + 1)
		r.add(k)
	}
	if l := r.list(); len(l) != 200 {
		t.Fatalf("kept %d of 200 unacknowledged results (200s apart)", len(l))
	}
	var acked []uint64
	for i := uint64(1); i <= 200; i++ {
		if i%3 != 0 || i < 100 {
			acked = append(acked, i)
		}
	}
	r.ack(append(acked, 999, 0))
	l := r.list()
	if len(l) != 33 || l[0].taskID != "101" || l[len(l)-1].taskID != "197" {
		t.Fatalf("after the acks: %d kept, %s..%s", len(l), l[0].taskID, l[len(l)-1].taskID)
	}
	if r.n != len(l) || r.bytes != len(l)*l[0].size || len(r.at) != len(l) {
		t.Fatalf("books: n %d, bytes %d, index %d for %d results", r.n, r.bytes, len(r.at), len(l))
	}
	// The compaction keeps the index right.
	for i := range 3 * maxRecent {
		k := keptOf("x"+fmt.Sprint(i), 1, now)
		k.lease = uint64(1000 + i)
		r.add(k)
		if i%2 == 0 {
			r.ack([]uint64{k.lease})
		}
	}
	r.ack([]uint64{102, 105})
	if l := r.list(); len(l) != 31+3*maxRecent/2 || l[0].taskID != "107" {
		t.Fatalf("after compactions: %d kept, first %s", len(l), l[0].taskID)
	}
	var big recentList
	big.acks = true
	for i := range maxUnacked + 10 {
		k := keptOf(fmt.Sprint(i), 1, now)
		k.lease = uint64(i + 1)
		big.add(k)
	}
	if l := big.list(); len(l) != maxUnacked || l[0].taskID != "10" {
		t.Fatalf("bounded: %d kept (bound %d), first %s", len(l), maxUnacked, l[0].taskID)
	}
}

// TestKeeperDrop: acknowledged hand-overs are forgotten by task; End drops
// the run's results.
func TestKeeperDrop(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := newKeeper(time.Minute)
	k.now = func() time.Time { return now }
	k.put("j1", keptOf("a", 10, now), keptOf("b", 10, now), keptOf("c", 10, now))
	k.put("j2", keptOf("a", 10, now))
	k.drop("j1", []string{"a", "x"})
	if k.count("j1") != 2 || k.count("j2") != 1 {
		t.Fatalf("after the acks: %d and %d kept", k.count("j1"), k.count("j2"))
	}
	k.drop("j1", nil)
	if k.count("j1") != 0 || k.count("j2") != 1 || k.bytes != keptOf("a", 10, now).size {
		t.Fatalf("after the end: %d and %d kept, %d bytes", k.count("j1"), k.count("j2"), k.bytes)
	}
	now = now.Add(2 * time.Minute) // the dropped results' fifo refs are skipped
	if k.count("j2") != 0 || k.bytes != 0 || len(k.fifo) != 0 {
		t.Fatalf("after expiry: %d kept, %d bytes, %d refs", k.count("j2"), k.bytes, len(k.fifo))
	}
}

// offer is what a new session of job is offered at once (watch).
func offer(k *keeper, job string) ([]*peerpb.Handovers, int) {
	msgs, n, _, w := k.watch(job)
	k.unwatch(job, w)
	return msgs, n
}

// TestOrphanWatch: a new session of a job learns, at one instant, the
// results its lost sessions kept and the tasks they still run (only its
// job's); each of those is handed to it as it ends, whatever its
// outcome, a successful one is kept for later sessions too, and one
// that ended before the session started is among the kept results, not
// announced as running.
func TestOrphanWatch(t *testing.T) {
	k := newKeeper(time.Minute)
	now := time.Now()
	lease := func(task string) *peerpb.Lease { return &peerpb.Lease{LeaseId: 9, TaskId: task, Attempt: 2} }
	a := k.addOrphan("j", orphan{taskID: "a", attempt: 2, took: now})
	b := k.addOrphan("j", orphan{taskID: "b", attempt: 2, took: now})
	c := k.addOrphan("j", orphan{taskID: "c", attempt: 2, took: now})
	k.addOrphan("other", orphan{taskID: "a", attempt: 0, took: now})
	k.orphanEnded("j", c, lease("c"), &peerpb.Result{LeaseId: 9, Outcome: report.OutcomeOK}, now)

	msgs, n, running, w := k.watch("j")
	defer k.unwatch("j", w)
	if n != 1 || msgs[0].Handovers[0].TaskId != "c" {
		t.Fatalf("kept: %d %v, want c", n, msgs)
	}
	var ids []string
	for _, o := range running {
		if o.Attempt != 2 || o.StartedUnixNano != now.UnixNano() {
			t.Fatalf("running: %+v", o)
		}
		ids = append(ids, o.TaskId)
	}
	if slices.Sort(ids); !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("running %v, want a and b", ids)
	}
	// A second session of the job (after this one was lost too) watches
	// the same tasks.
	_, _, again, w2 := k.watch("j")
	defer k.unwatch("j", w2)
	if len(again) != 2 {
		t.Fatalf("second watch: %d running", len(again))
	}

	k.orphanEnded("j", b, lease("b"), &peerpb.Result{LeaseId: 9, Outcome: report.OutcomeCrashed, Error: "boom"}, now)
	k.orphanEnded("j", a, lease("a"), &peerpb.Result{LeaseId: 9, Outcome: report.OutcomeOK}, now)
	for _, w := range []*orphanWatch{w, w2} {
		got := map[string]string{}
		for range 2 {
			select {
			case h := <-w.ch:
				if h.Result.LeaseId != 0 || h.Attempt != 2 {
					t.Fatalf("handover %+v", h)
				}
				got[h.TaskId] = h.Result.Outcome
			default:
				t.Fatalf("ends handed to the watch: %v, want a and b", got)
			}
		}
		if got["a"] != report.OutcomeOK || got["b"] != report.OutcomeCrashed {
			t.Fatalf("ends %v", got)
		}
	}
	if k.count("j") != 2 { // c and a; not the crashed b
		t.Fatalf("kept %d, want 2", k.count("j"))
	}
	if _, _, left, w3 := k.watch("j"); len(left) != 0 {
		t.Fatalf("still running after their ends: %v", left)
	} else {
		k.unwatch("j", w3)
	}
}

// TestNewSessionEndsOlderOnes: a new session of a run ends the run's
// older sessions still open here and waits until they are over (their
// running tasks are the keeper's orphans then), before it takes stock;
// sessions of other runs are left alone.
func TestNewSessionEndsOlderOnes(t *testing.T) {
	n := &Node{keep: newKeeper(time.Minute)}
	sess := func() *session {
		s := &session{n: n, log: slog.New(slog.DiscardHandler), gone: make(chan struct{}), left: make(chan struct{})}
		s.supersede = func() { close(s.gone) } // its stream ends, then end()
		return s
	}
	old, other := sess(), sess()
	if err := old.takeOver(t.Context(), "j/r1"); err != nil {
		t.Fatal(err)
	}
	if err := other.takeOver(t.Context(), "j/r2"); err != nil {
		t.Fatal(err)
	}
	fresh := sess()
	if err := fresh.takeOver(t.Context(), "j/r1"); err != nil {
		t.Fatal(err)
	}
	if !closed(old.gone) || closed(other.gone) {
		t.Fatalf("older session of the run ended %v, of another run %v; want true, false", closed(old.gone), closed(other.gone))
	}
	n.keep.leave("j/r1", old)
	if got := n.keep.join("j/r1", sess()); len(got) != 1 || got[0] != fresh {
		t.Fatalf("open sessions of the run: %v, want the fresh one", got)
	}
	// One that never ends is waited for as long as the new one lives.
	stuck := sess()
	stuck.supersede = func() {}
	n.keep.join("j/r3", stuck)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := sess().takeOver(ctx, "j/r3"); err == nil {
		t.Fatal("took over while an older session of the run was still open")
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
