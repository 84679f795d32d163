package node

import (
	"context"
	"fmt"
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
		msgs, _ := k.offer("j1")
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
	if msgs, _ := k.offer("j1"); msgs[0].Handovers[0].Result.Outputs[0].Size != 20 {
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
	msgs, n := k.offer("big")
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

// TestAwaitOrphans: a new session waits for the tasks of the job's lost
// sessions that still run, and only for those of its job, and not longer
// than it is told.
func TestAwaitOrphans(t *testing.T) {
	k := newKeeper(time.Minute)
	ctx := context.Background()
	if n := k.awaitOrphans(ctx, "other", time.Hour); n != 0 {
		t.Fatalf("nothing runs: %d", n)
	}
	k.orphaned("j", 2)
	if n := k.awaitOrphans(ctx, "j", 20*time.Millisecond); n != 2 {
		t.Fatalf("two run, bounded wait: %d", n)
	}
	if n := k.awaitOrphans(ctx, "other", time.Hour); n != 0 {
		t.Fatalf("another job's: %d", n)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		k.orphaned("j", -1)
		time.Sleep(10 * time.Millisecond)
		k.orphaned("j", -1)
	}()
	if n := k.awaitOrphans(ctx, "j", time.Minute); n != 0 {
		t.Fatalf("both finished: %d", n)
	}
}
