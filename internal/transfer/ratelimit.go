package transfer

import (
	"context"
	"sync"
	"time"
)

// rateLimiter is a token bucket shared by every stream of a server. A nil
// *rateLimiter never waits.
type rateLimiter struct {
	rate  float64 // bytes per second
	burst float64 // bucket size in bytes

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newRateLimiter(bytesPerSecond int64) *rateLimiter {
	if bytesPerSecond <= 0 {
		return nil
	}
	// A quarter second's worth, at least one default block, so that a
	// block never waits on a bucket that can never hold it.
	burst := max(float64(bytesPerSecond)/4, 1<<20)
	return &rateLimiter{rate: float64(bytesPerSecond), burst: burst, tokens: burst, last: time.Now()}
}

// wait blocks until n bytes may be sent or ctx ends. It takes the tokens
// at once (possibly into debt) and sleeps the debt off, so concurrent
// callers queue fairly in arrival order.
func (l *rateLimiter) wait(ctx context.Context, n int) error {
	if l == nil || n == 0 {
		return nil
	}
	l.mu.Lock()
	now := time.Now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	l.tokens -= float64(n)
	var d time.Duration
	if l.tokens < 0 {
		d = time.Duration(-l.tokens / l.rate * float64(time.Second))
	}
	l.mu.Unlock()
	if d == 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
