package node

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// shutdownAfter runs shutdown on a node whose one running lease ends after
// run, and returns how long shutdown took (in the bubble's fake time).
func shutdownAfter(t *testing.T, grace, run time.Duration) time.Duration {
	t.Helper()
	var took time.Duration
	synctest.Test(t, func(t *testing.T) {
		s := newSched(2, 0)
		n := &Node{cfg: Config{Name: "n", ShutdownGrace: grace}, sched: s, log: slog.New(slog.DiscardHandler)}
		sess := &session{kick: make(chan struct{}, 1)}
		s.mu.Lock()
		s.busy, sess.running, sess.runningTasks = 1, 1, 1
		s.mu.Unlock()
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			time.Sleep(run) // the task's own run time (fake)
			s.mu.Lock()
			s.endLocked(sess, 1)
			s.mu.Unlock()
		}()
		t0 := time.Now()
		n.shutdown()
		took = time.Since(t0)
		<-ended
	})
	return took
}

// Shutdown returns the moment the last running lease ends, not at the
// next tick of a poll.
func TestShutdownWaitsForLastLease(t *testing.T) {
	if got := shutdownAfter(t, time.Second, 30*time.Millisecond); got != 30*time.Millisecond {
		t.Fatalf("shutdown took %v, want 30ms (when the last lease ended)", got)
	}
}

// A lease that outlasts the grace period does not hold shutdown up.
func TestShutdownGraceBounds(t *testing.T) {
	if got := shutdownAfter(t, time.Second, time.Minute); got != time.Second {
		t.Fatalf("shutdown took %v, want the grace period, 1s", got)
	}
}

// idle is closed at once when nothing runs, and only then otherwise.
func TestSchedIdle(t *testing.T) {
	s := newSched(1, 0)
	select {
	case <-s.idle():
	default:
		t.Fatal("idle not closed with nothing running")
	}
	sess := &session{kick: make(chan struct{}, 1)}
	s.mu.Lock()
	s.busy, sess.running, sess.runningTasks = 1, 1, 1
	s.mu.Unlock()
	ch := s.idle()
	select {
	case <-ch:
		t.Fatal("idle closed with a lease running")
	default:
	}
	s.mu.Lock()
	s.endLocked(sess, 1)
	s.mu.Unlock()
	select {
	case <-ch:
	default:
		t.Fatal("idle not closed when the last lease ended")
	}
}

// The slot runners stop when run's context ends, however soon after run
// it ends: an earlier helper goroutine could unregister the stop before it
// fired, leaving the runners waiting (and Serve in wg.Wait) for good.
func TestSchedRunnersStopWithContext(t *testing.T) {
	for i := range 2000 {
		s := newSched(1, 0)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		s.run(ctx, &wg)
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second): // a bound on a failing test
			t.Fatalf("round %d: slot runners still running 10s after their context ended", i)
		}
	}
}
