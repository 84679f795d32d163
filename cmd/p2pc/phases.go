package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/job"
)

// execStart is about when the process started: package variables are set
// before main runs (the Go runtime's own start, a few milliseconds, is
// not counted).
var execStart = time.Now()

// phaseTrace prints when each phase of `p2pc run` ends, counted from
// execStart, with the time since the previous mark (hidden flag
// --trace-phases). A nil
// *phaseTrace prints nothing.
type phaseTrace struct {
	mu   sync.Mutex
	w    io.Writer
	last time.Time
}

// activeTrace is the trace of this process's run command (nil: none), for
// main's last mark.
var activeTrace *phaseTrace

func newPhaseTrace(w io.Writer, on bool) *phaseTrace {
	if !on {
		return nil
	}
	activeTrace = &phaseTrace{w: w, last: execStart}
	return activeTrace
}

// mark records that the phase named what has just ended.
func (t *phaseTrace) mark(what string) {
	if t == nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "phase %8.1f ms  (+%6.1f ms)  %s\n", ms(now.Sub(execStart)), ms(now.Sub(t.last)), what)
	t.last = now
}

// fn is mark as a func, nil when tracing is off (job.RunOptions.Phase).
func (t *phaseTrace) fn() func(string) {
	if t == nil {
		return nil
	}
	return t.mark
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// tracedEvents marks the first and the last task result.
type tracedEvents struct {
	job.Events
	t *phaseTrace

	mu                   sync.Mutex
	total, done, results int
}

func traceEvents(ev job.Events, t *phaseTrace) job.Events {
	if t == nil {
		return ev
	}
	return &tracedEvents{Events: ev, t: t}
}

func (e *tracedEvents) Started(total, done int) {
	e.mu.Lock()
	e.total, e.done = total, done
	e.mu.Unlock()
	e.t.mark(fmt.Sprintf("tasks start (%d of %d to run)", total-done, total))
	e.Events.Started(total, done)
}

func (e *tracedEvents) TaskDone(id string, ok bool) {
	e.mu.Lock()
	e.done++
	e.results++
	first, last := e.results == 1, e.done == e.total
	e.mu.Unlock()
	if first {
		e.t.mark("first result")
	}
	if last {
		e.t.mark("last result")
	}
	e.Events.TaskDone(id, ok)
}
