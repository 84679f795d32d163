package webui

import "time"

// cpuWindow is the window of a served job's CPU use: short, so that the
// view follows the load.
const cpuWindow = 5 * time.Second

// meters keep counters over time, by key, for their rates. A key not
// sampled for a window is forgotten; a counter that went down (its
// source started again) starts its history anew.
type meters struct {
	hist map[string][]sample
}

type sample struct {
	t time.Time
	v float64
}

// rate records v at now for key and returns how fast it grew over the
// window: per second, 0 until a second of history is there.
func (m *meters) rate(key string, now time.Time, v float64, window time.Duration) float64 {
	if m.hist == nil {
		m.hist = map[string][]sample{}
	}
	h := m.hist[key]
	if n := len(h); n > 0 && v < h[n-1].v {
		h = h[:0]
	}
	h = append(h, sample{now, v})
	// Keep the newest sample at least window old as the base.
	for len(h) > 2 && now.Sub(h[1].t) >= window {
		h = h[1:]
	}
	m.hist[key] = h
	dt := now.Sub(h[0].t).Seconds()
	if dt < 1 {
		return 0
	}
	return (v - h[0].v) / dt
}

// sweep forgets the keys not sampled within the longest window.
func (m *meters) sweep(now time.Time) {
	for k, h := range m.hist {
		if now.Sub(h[len(h)-1].t) > RateWindow {
			delete(m.hist, k)
		}
	}
}
