package testwait

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// poll bounds the pause between two checks of a condition: the first
// checks come quickly, later ones every 50 ms.
const (
	pollMin = time.Millisecond
	pollMax = 50 * time.Millisecond
)

// For checks cond until it holds and returns how long that took; after d
// it fails t, saying what it waited for.
func For(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if err := Until(context.Background(), d, what, cond); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

// Until checks cond until it holds, ctx ends or d passes; the error names
// what it waited for.
func Until(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	pause := pollMin
	timer := time.NewTimer(pause)
	defer timer.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			if cond() {
				return nil
			}
			return fmt.Errorf("waited %s for %s: %w", d, what, ctx.Err())
		case <-timer.C:
		}
		pause = min(2*pause, pollMax)
		timer.Reset(pause)
	}
	return nil
}
