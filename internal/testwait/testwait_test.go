package testwait

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilHolds(t *testing.T) {
	var n atomic.Int32
	if err := Until(context.Background(), 5*time.Second, "three checks", func() bool { return n.Add(1) >= 3 }); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 3 {
		t.Fatalf("cond checked %d times, want 3", got)
	}
}

func TestUntilTimesOut(t *testing.T) {
	err := Until(context.Background(), 20*time.Millisecond, "never", func() bool { return false })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "never") {
		t.Fatalf("err = %v, want a deadline naming the condition", err)
	}
}

func TestUntilCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Until(ctx, time.Hour, "never", func() bool { return false }); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
}

// parkedHere blocks until stop is closed: a goroutine to find by name.
func parkedHere(stop chan struct{}) { <-stop }

func TestLeaked(t *testing.T) {
	stop := make(chan struct{})
	go parkedHere(stop)
	left := Leaked(10 * time.Millisecond)
	if !anyHas(left, "testwait.parkedHere") {
		t.Fatalf("a parked goroutine was not reported; got %q", left)
	}
	if left := Leaked(10*time.Millisecond, "testwait.parkedHere"); anyHas(left, "testwait.parkedHere") {
		t.Fatalf("an ignored goroutine was reported: %q", left)
	}
	close(stop)
	if left := Leaked(5 * time.Second); anyHas(left, "testwait.parkedHere") {
		t.Fatalf("a goroutine that ended was reported: %q", left)
	}
}

func anyHas(stacks []string, s string) bool {
	for _, g := range stacks {
		if strings.Contains(g, s) {
			return true
		}
	}
	return false
}

func TestStarted(t *testing.T) {
	stopOld := make(chan struct{})
	go parkedHere(stopOld)
	before := Running()
	defer close(stopOld)
	stop := make(chan struct{})
	go parkedThere(stop)
	left := before.Started(10 * time.Millisecond)
	if !anyHas(left, "testwait.parkedThere") || anyHas(left, "testwait.parkedHere") {
		t.Fatalf("want only the goroutine started after the snapshot; got %q", left)
	}
	close(stop)
	if left := before.Started(5 * time.Second); len(left) > 0 {
		t.Fatalf("goroutines that ended were reported: %q", left)
	}
}

// parkedThere is parkedHere under another name.
func parkedThere(stop chan struct{}) { <-stop }
