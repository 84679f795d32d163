package harness

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// CPUSample is a process's CPU time (user + system, all its threads) at
// a moment of its life.
type CPUSample struct {
	At  time.Duration `json:"at_ns"`  // since the sampling started
	CPU time.Duration `json:"cpu_ns"` // cumulative utime + stime
}

// ProcCPU reads a process's cumulative user + system CPU time from
// /proc/<pid>/stat (10 ms resolution).
func ProcCPU(pid int) (time.Duration, error) {
	_, cpu, err := ProcStat(pid)
	return cpu, err
}

// ProcStat reads a process's parent pid and its cumulative user + system
// CPU time from /proc/<pid>/stat (10 ms resolution).
func ProcStat(pid int) (ppid int, cpu time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read cpu time of %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("read cpu time of %d: malformed stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), f[1] field 4 (ppid); utime and stime are
	// fields 14 and 15.
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("read cpu time of %d: short stat", pid)
	}
	pp, err0 := strconv.Atoi(f[1])
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err0 != nil || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("read cpu time of %d: malformed ppid/utime/stime", pid)
	}
	return pp, time.Duration(ut+st) * clockTick, nil
}

// SampleCPU samples pid's CPU time every interval until ctx ends or the
// process is gone, and returns the samples. The first is taken at once.
func SampleCPU(ctx context.Context, pid int, interval time.Duration) []CPUSample {
	start := time.Now()
	var out []CPUSample
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		cpu, err := ProcCPU(pid)
		if err != nil {
			return out
		}
		out = append(out, CPUSample{At: time.Since(start), CPU: cpu})
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}

// Busy turns cumulative samples into the busy fraction of each interval:
// CPU time used over wall time passed (1.0 = one core busy all along).
// Samples closer than minGap to the previous one used are merged into the
// next interval (a late ticker fires twice in a row, and 10 ms of CPU
// over a millisecond is no measurement).
func Busy(s []CPUSample, minGap time.Duration) (at []time.Duration, busy []float64) {
	last := 0
	for i := 1; i < len(s); i++ {
		dt := s[i].At - s[last].At
		if dt <= 0 || dt < minGap {
			continue
		}
		at = append(at, s[i].At)
		busy = append(busy, float64(s[i].CPU-s[last].CPU)/float64(dt))
		last = i
	}
	return at, busy
}

// MachineCPU reads the CPU time all cores spent busy since boot (user,
// nice, system, irq, softirq, steal from /proc/stat): the difference of
// two readings is what the whole machine used in between.
func MachineCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("read machine cpu time: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("read machine cpu time: malformed /proc/stat")
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read machine cpu time: %w", err)
		}
		ticks += v
	}
	return time.Duration(ticks) * clockTick, nil
}
