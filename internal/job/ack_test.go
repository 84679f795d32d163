package job

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/peerpb"
)

// TestAckerReady: results are acknowledged once their journal pass is
// committed, lease IDs and hand-overs' task IDs alike, in messages of at
// most peerpb.MaxAcks IDs; the others wait.
func TestAckerReady(t *testing.T) {
	var a acker
	for i := range peerpb.MaxAcks + 10 {
		a.q = append(a.q, pending{need: 3, lease: uint64(i + 1)})
	}
	a.q = append(a.q, pending{need: 2, task: "t7"}, pending{need: 4, lease: 99999}, pending{need: 5, task: "t8"})
	if msgs := a.ready(1); len(msgs) != 0 || len(a.q) != peerpb.MaxAcks+13 {
		t.Fatalf("pass 1 committed: %d messages, %d waiting", len(msgs), len(a.q))
	}
	msgs := a.ready(3)
	if len(msgs) != 2 || len(msgs[0].LeaseIds) != peerpb.MaxAcks || len(msgs[1].LeaseIds) != 10 || len(msgs[1].Tasks) != 1 || msgs[1].Tasks[0] != "t7" {
		t.Fatalf("pass 3 committed: %d messages", len(msgs))
	}
	if len(a.q) != 2 || a.q[0].lease != 99999 || a.q[1].task != "t8" {
		t.Fatalf("still waiting: %+v", a.q)
	}
	if msgs := a.ready(9); len(msgs) != 1 || len(msgs[0].LeaseIds) != 1 || len(msgs[0].Tasks) != 1 || len(a.q) != 0 {
		t.Fatalf("pass 9 committed: %v, %d waiting", msgs, len(a.q))
	}
}

// TestDurabilityWatch: a watcher learns of every committed pass after it
// began to watch, and committed never goes back.
func TestDurabilityWatch(t *testing.T) {
	var d durability
	w := d.watch()
	d.reached(2)
	select {
	case <-w:
	default:
		t.Fatal("the watcher missed pass 2")
	}
	w = d.watch()
	d.reached(1) // an older pass, committed with 2 already
	select {
	case <-w:
		t.Fatal("woken for an older pass")
	default:
	}
	if d.committed.Load() != 2 {
		t.Fatalf("committed %d, want 2", d.committed.Load())
	}
}

// TestHandoverGate: the hold ends when the last expected peer is done
// (by its full name, or by its node name when it could not be reached),
// once; peers that never come are given up after the bound.
func TestHandoverGate(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	mk := func(peers ...string) (*handoverGate, *int, *[]string) {
		released, gone := 0, []string{}
		g := &handoverGate{log: log, release: func() { released++ }, waiting: map[string]bool{}, started: time.Now(),
			gone: func(p []string) { gone = append(gone, p...) }}
		for _, p := range peers {
			g.waiting[p] = false
		}
		g.timer = time.AfterFunc(time.Hour, func() {})
		return g, &released, &gone
	}
	g, released, _ := mk("a@1", "b@2", "c@3")
	if !g.expects("a") || g.expects("d") || (*handoverGate)(nil).expects("a") {
		t.Fatal("expects")
	}
	g.done("a@1")
	g.done("x@9") // not waited for
	g.failed("b")
	if *released != 0 {
		t.Fatal("released before the last peer")
	}
	g.done("c@3")
	g.done("c@3")
	if *released != 1 {
		t.Fatalf("released %d times, want once", *released)
	}

	g, released, gone := mk("a@1", "b@2")
	g.done("b@2")
	g.expire()
	g.done("a@1") // too late: nothing more happens
	if *released != 1 || fmt.Sprint(*gone) != "[a@1]" {
		t.Fatalf("after the bound: released %d, gone %v", *released, *gone)
	}

	// One that enrolled is waited for past the bound, until its
	// hand-over is in (or handoverMax).
	g, released, gone = mk("a@1", "b@2", "c@3")
	g.enrolled("a@1")
	g.enrolled("x@9") // not waited for: changes nothing
	g.expire()
	if *released != 0 || fmt.Sprint(*gone) != "[b@2 c@3]" || !g.expects("a") || g.expects("x") {
		t.Fatalf("after the bound with a@1 handing over: released %d, gone %v", *released, *gone)
	}
	g.done("a@1")
	if *released != 1 {
		t.Fatalf("released %d times after a@1's hand-over, want once", *released)
	}
	g.timer.Stop()
	g, released, gone = mk("a@1")
	g.enrolled("a@1")
	g.started = g.started.Add(-handoverMax)
	g.expire()
	if *released != 1 || fmt.Sprint(*gone) != "[a@1]" {
		t.Fatalf("after handoverMax: released %d, gone %v", *released, *gone)
	}
}
