package sched

import "time"

// The probe phase. Until a run time is measured a batch is a single
// lease, so a job whose workers all asked at once would start with every
// slot on a single lease: for tasks of microseconds a whole first wave of
// the expensive path. During the probe phase a worker gets at most
// ProbeLeases leases; the phase ends when the first run time is measured
// (then batches are sized by it) or when the probe window, counted from
// the job's first lease, passes without one (the tasks are long, or the
// plugin processes cold: every slot gets a single lease, as without a
// probe). A job of long tasks loses at most the window.
const (
	// ProbeWindow is the longest the probe phase holds leases back.
	ProbeWindow = BatchWork
	// ProbeLeases is how many leases a worker gets during the phase.
	ProbeLeases = 1
)

// probe is the probe phase's state: a plain value the queue keeps under
// its lock.
type probe struct {
	window time.Duration  // 0: no probe phase
	start  time.Time      // the first lease (zero: none yet)
	over   bool           // measured, or the window passed
	out    map[string]int // leases per worker during the phase
}

func newProbe(window time.Duration) probe {
	return probe{window: window, over: window <= 0, out: map[string]int{}}
}

// hold reports whether peer must wait before it takes another lease at
// now, and then for at most how long (the window's rest).
func (p *probe) hold(peer string, now time.Time) (bool, time.Duration) {
	if p.over || p.out[peer] < ProbeLeases {
		return false, 0
	}
	left := p.start.Add(p.window).Sub(now)
	if left <= 0 {
		p.end()
		return false, 0
	}
	return true, left
}

// leased records a lease handed to peer at now.
func (p *probe) leased(peer string, now time.Time) {
	if p.over {
		return
	}
	if p.start.IsZero() {
		p.start = now
	}
	p.out[peer]++
}

// measured ends the phase: a run time is known.
func (p *probe) measured() { p.end() }

func (p *probe) end() {
	p.over = true
	p.out = nil
}
