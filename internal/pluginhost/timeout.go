package pluginhost

import (
	"context"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/sandbox"
)

// withTaskTimeout is context.WithTimeout for a plugin call, except that
// its clock stops while the plugin processes are frozen
// (sandbox.Freeze: p2pc join --pause-when-busy): a task paused while the
// machine's owner is busy gets its whole timeout of running time. When
// the timeout has passed, ctx is canceled with cause
// context.DeadlineExceeded. It carries no deadline (a frozen spell moves
// it), so the plugin's side learns of the end by the call's cancellation.
func withTaskTimeout(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	frozen0 := sandbox.FrozenTime()
	var (
		mu      sync.Mutex
		t       *time.Timer
		granted time.Duration // frozen time already added to the timeout
	)
	fire := func() {
		mu.Lock()
		defer mu.Unlock()
		if more := sandbox.FrozenTime() - frozen0 - granted; more > 0 {
			granted += more
			t.Reset(more)
			return
		}
		cancel(context.DeadlineExceeded)
	}
	mu.Lock()
	t = time.AfterFunc(timeout, fire)
	mu.Unlock()
	return ctx, func() {
		mu.Lock()
		t.Stop()
		mu.Unlock()
		cancel(context.Canceled)
	}
}

// afterGrace returns a context with ctx's values that ends grace after
// ctx ends (with ctx's cause), and a stop that ends it at once.
func afterGrace(ctx context.Context, grace time.Duration) (context.Context, func()) {
	g, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var (
		mu sync.Mutex
		t  *time.Timer
	)
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		t = time.AfterFunc(grace, func() { cancel(context.Cause(ctx)) })
	})
	return g, func() {
		stopAfter()
		mu.Lock()
		if t != nil {
			t.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
	}
}
