package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
)

// procRSS is a process's resident set size in bytes (Linux:
// /proc/PID/status VmRSS).
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("rss of %d: %w", pid, err)
	}
	for line := range bytes.Lines(b) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			f := bytes.Fields(rest)
			if len(f) != 2 || string(f[1]) != "kB" {
				break
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil {
				break
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("rss of %d: no VmRSS line in /proc/%d/status", pid, pid)
}

// rssTrace is what one process's RSS did while sampled: in bytes, the
// first sample, the largest and the last.
type rssTrace struct {
	Before int64 `json:"before"`
	Peak   int64 `json:"peak"`
	After  int64 `json:"after"`
	N      int   `json:"samples"`
}

// rssSampler samples the RSS of some processes (by name) every interval
// until stopped.
type rssSampler struct {
	stop context.CancelFunc
	done chan struct{}
	mu   sync.Mutex
	got  map[string]*rssTrace
	err  error
}

// sampleRSS takes a first sample of every process of pids at once, then
// samples them every interval until stop.
func sampleRSS(pids map[string]int, interval time.Duration) *rssSampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &rssSampler{stop: cancel, done: make(chan struct{}), got: map[string]*rssTrace{}}
	s.sample(pids)
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				s.sample(pids)
				return
			case <-t.C:
				s.sample(pids)
			}
		}
	}()
	return s
}

func (s *rssSampler) sample(pids map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, pid := range pids {
		n, err := procRSS(pid)
		if err != nil {
			if s.err == nil {
				s.err = fmt.Errorf("member %s: %w", name, err)
			}
			continue
		}
		tr := s.got[name]
		if tr == nil {
			tr = &rssTrace{Before: n}
			s.got[name] = tr
		}
		tr.Peak, tr.After = max(tr.Peak, n), n
		tr.N++
	}
}

// Stop takes a last sample and returns the traces.
func (s *rssSampler) Stop() (map[string]rssTrace, error) {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]rssTrace{}
	for name, tr := range s.got {
		out[name] = *tr
	}
	return out, s.err
}

// gctraceRe matches a line the Go runtime writes per collection with
// GODEBUG=gctrace=1: heap at the start, at the end, and live (marked),
// in MB.
var gctraceRe = regexp.MustCompile(`(?m)^gc \d+ @[0-9.]+s \d+%: .*? (\d+)->(\d+)->(\d+) MB`)

// liveHeaps returns the live heap (MB) after each collection that log
// reports (gctrace), in order.
func liveHeaps(log string) []int64 {
	var out []int64
	for _, m := range gctraceRe.FindAllStringSubmatch(log, -1) {
		if n, err := strconv.ParseInt(m[3], 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// heapTrace is a process's live heap (MB, after a collection, from its
// gctrace lines) around a window of its log: after the last collection
// before it (-1: none), the largest within it, after the last within it,
// and how many collections the window saw.
type heapTrace struct {
	Before int64 `json:"before_mb"`
	Peak   int64 `json:"peak_mb"`
	After  int64 `json:"after_mb"`
	GCs    int   `json:"gcs"`
}

// heapWindow reads log's gctrace lines before from and from it on. A
// window without a collection has the live heap of the last one before
// it as its peak and after (the heap grew less than the collector lets
// it: p2pc collects late, cmd/p2pc/gc.go); ok is false when log has no
// collection at all.
func heapWindow(log string, from int) (h heapTrace, ok bool) {
	before, in := liveHeaps(log[:from]), liveHeaps(log[from:])
	h.Before = -1
	if len(before) > 0 {
		h.Before = before[len(before)-1]
	}
	switch {
	case len(in) > 0:
		h.Peak, h.After, h.GCs = slices.Max(in), in[len(in)-1], len(in)
	case len(before) > 0:
		h.Peak, h.After = h.Before, h.Before
	default:
		return h, false
	}
	return h, true
}
