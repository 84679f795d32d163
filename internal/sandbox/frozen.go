package sandbox

import (
	"sync"
	"time"
)

// frozenClock adds up the time Freeze held this process's plugin
// processes frozen.
var frozenClock pauseClock

type pauseClock struct {
	mu    sync.Mutex
	since time.Time     // frozen since (zero: not frozen)
	total time.Duration // before since
}

func (c *pauseClock) set(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case on && c.since.IsZero():
		c.since = time.Now()
	case !on && !c.since.IsZero():
		c.total += time.Since(c.since)
		c.since = time.Time{}
	}
}

func (c *pauseClock) read() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.since.IsZero() {
		return c.total
	}
	return c.total + time.Since(c.since)
}

// FrozenTime is how long Freeze has held this process's plugin processes
// frozen in all, a frozen spell still going on included: a task's timeout
// does not count it (pluginhost), so a task paused while the machine's
// owner is busy is not failed as timed out for it.
func FrozenTime() time.Duration { return frozenClock.read() }

// Paused says whether Freeze holds this process's plugin processes
// frozen now (a frozen process dies of SIGKILL only once thawed).
func Paused() bool {
	frozenClock.mu.Lock()
	defer frozenClock.mu.Unlock()
	return !frozenClock.since.IsZero()
}
