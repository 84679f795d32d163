package node

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/sandbox"
)

func TestBusyMeter(t *testing.T) {
	for _, tt := range []struct {
		name    string
		samples []float64
		changes []bool // the state after each change
	}{
		{"quiet", []float64{10, 20, 30, 10}, nil},
		{"busy then quiet", []float64{90, 90, 90, 10, 10, 10}, []bool{true, false}},
		{"spikes do not pause", []float64{90, 90, 10, 90, 90, 10, 90}, nil},
		{"dips do not resume", []float64{90, 90, 90, 10, 10, 90, 10, 10, 90}, []bool{true}},
		{"at the threshold is quiet", []float64{50, 50, 50, 50}, nil},
	} {
		m := &busyMeter{pct: 50, need: 3}
		var got []bool
		for _, s := range tt.samples {
			if changed, paused := m.add(s); changed {
				got = append(got, paused)
			}
		}
		if !equalBools(got, tt.changes) {
			t.Errorf("%s: changes %v, want %v", tt.name, got, tt.changes)
		}
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseProcStat(t *testing.T) {
	in := "cpu  100 5 50 800 20 3 2 0 7 0\ncpu0 50 2 25 400 10 1 1 0 0 0\nintr 1 2 3\n"
	total, busy, err := parseProcStat([]byte(in))
	if err != nil || total != 980 || busy != 160 {
		t.Errorf("parseProcStat = %d, %d, %v; want 980, 160 (guest counted in user)", total, busy, err)
	}
	if _, _, err := parseProcStat([]byte("intr 1\n")); err == nil {
		t.Error("no cpu line: no error")
	}
}

func TestSelfCPU(t *testing.T) {
	stat := "1234 (p2pc (join)) S 1 1234 1234 0 -1 4194560 100 0 0 0 42 8 0 0 20 0 10 0 1000 0 0"
	if got := selfCPU([]byte(stat)); got != 50 {
		t.Errorf("selfCPU = %d, want 50", got)
	}
}

func TestOtherPct(t *testing.T) {
	a := cpuSample{total: 1000, busy: 400, ours: 100}
	for _, tt := range []struct {
		cur  cpuSample
		want float64
	}{
		{cpuSample{total: 2000, busy: 1400, ours: 100}, 100},
		{cpuSample{total: 2000, busy: 1400, ours: 600}, 50},
		{cpuSample{total: 2000, busy: 1400, ours: 1500}, 0}, // ours measured late: never negative
		{cpuSample{total: 1000, busy: 400, ours: 100}, 0},   // no time passed
	} {
		if got := a.otherPct(tt.cur); got != tt.want {
			t.Errorf("otherPct(%+v) = %v, want %v", tt.cur, got, tt.want)
		}
	}
}

func TestMisfitAndTaskLimits(t *testing.T) {
	n := &Node{cfg: Config{Slots: 4, Volunteer: Volunteer{CPUs: 1.5, Memory: 4 << 30, Disk: 8 << 30, Idle: true}}}
	for _, tt := range []struct {
		h    *peerpb.Hello
		want string
	}{
		{&peerpb.Hello{}, ""},
		{&peerpb.Hello{Resources: &peerpb.Resources{Os: runtime.GOOS, Arch: runtime.GOARCH, Memory: 4 << 30, Cpus: 1.5}}, ""},
		{&peerpb.Hello{Resources: &peerpb.Resources{Os: "plan9"}}, "resources.os is plan9"},
		{&peerpb.Hello{Resources: &peerpb.Resources{Arch: "mips"}}, "resources.arch is mips"},
		{&peerpb.Hello{Resources: &peerpb.Resources{Memory: 5 << 30}}, "a task needs 5 GiB of memory (resources.memory), this peer gives its tasks 4 GiB (--memory)"},
		{&peerpb.Hello{Resources: &peerpb.Resources{Cpus: 2}}, "a task needs 2 CPUs"},
		{&peerpb.Hello{Resources: &peerpb.Resources{Gpus: 1}}, "a task needs 1 GPU (resources.gpus), this peer gives its tasks 0 GPUs (p2pc join --gpus)"},
		{&peerpb.Hello{Plugin: &peerpb.FileRef{Size: 1 << 30}, Inputs: []*peerpb.FileRef{{Size: 7 << 30}}}, ""},
		{&peerpb.Hello{Plugin: &peerpb.FileRef{Size: 1 << 30}, Inputs: []*peerpb.FileRef{{Size: 7 << 30}, {Size: 1}}},
			"the job's plugin and inputs take 8 GiB, this peer's block store holds at most 8 GiB (--disk)"},
	} {
		got := n.misfit(tt.h)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("misfit(%v) = %q, want %q", tt.h, got, tt.want)
		}
	}
	full := n.storeFull(fmt.Errorf("fetch x: %w", &blocks.FullError{Need: 1 << 20, Held: 8 << 30, Cap: 8 << 30}))
	if !errors.Is(full, blocks.ErrFull) || !strings.Contains(full.Error(), "this peer's block store holds at most 8 GiB (p2pc join --disk), 8 GiB of it pinned by jobs or in use, 1 MiB more needed") {
		t.Errorf("storeFull = %v", full)
	}
	if l := n.taskLimits(0); l.Memory != 1<<30 || l.FileSize != 2<<30 || !l.Idle {
		t.Errorf("taskLimits(0) = %+v, want 1 GiB (4 GiB / 4 slots), 2 GiB of disk, idle", l)
	}
	if l := n.taskLimits(3 << 30); l.Memory != 3<<30 {
		t.Errorf("taskLimits(3 GiB) = %+v", l)
	}
	bare := &Node{cfg: Config{Slots: 2}}
	if l := bare.taskLimits(0); l.Memory != 0 || l.FileSize != DefaultTaskDisk || l.WithDefaults().Memory != sandbox.DefaultMemory {
		t.Errorf("no caps: taskLimits(0) = %+v", l)
	}
}

func TestPausedTooLong(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const timeout = 10 * time.Second
	end := timeout + peerpb.LeaseGrace/2
	given := &queued{admitted: t0, frozen0: time.Second}
	given.paused.Store(true)
	for _, tt := range []struct {
		name   string
		it     *queued
		frozen time.Duration
		age    time.Duration
		want   bool
	}{
		{"frozen, near the backstop", &queued{admitted: t0, frozen0: time.Second}, 2 * time.Second, end, true},
		{"frozen, past its timeout, before the margin", &queued{admitted: t0, frozen0: time.Second}, 2 * time.Second, end - time.Millisecond, false},
		{"never frozen since it came: the backstop decides", &queued{admitted: t0, frozen0: time.Second}, time.Second, time.Minute, false},
		{"given back already", given, 2 * time.Second, time.Minute, false},
	} {
		if got := pausedTooLong(tt.it, tt.frozen, t0.Add(tt.age), timeout); got != tt.want {
			t.Errorf("%s: pausedTooLong = %v, want %v", tt.name, got, tt.want)
		}
	}
}
