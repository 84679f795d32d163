package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
)

// Volunteer are the machine owner's controls over the tasks a peer runs
// (p2pc join flags; zero values: no cap).
type Volunteer struct {
	// CPUs caps all tasks together (fractional; a CPU quota on the
	// peer's cgroup). A job whose resources.cpus exceeds it (or the
	// machine's CPUs) is refused.
	CPUs float64
	// Memory caps all tasks together; a task gets the job's
	// resources.memory, else Memory/slots (at most
	// sandbox.DefaultMemory). A job asking more per task is refused.
	Memory int64
	// Disk caps the tasks' work folders together: each task may use
	// Disk/slots (DefaultTaskDisk when 0), as file size (RLIMIT_FSIZE)
	// and as the size of its work folder after it ran. It also caps the
	// block store (a hard cap: see storeOptions); a job whose plugin and
	// inputs do not fit in it is refused.
	Disk int64
	// Idle runs tasks at idle priority (SCHED_IDLE).
	Idle bool
	// PauseWhenBusy, a percentage of the machine's CPU: when the use by
	// everything but this peer's tasks stays above it for BusyFor, the
	// tasks are frozen and no new leases are taken until it stays below
	// for BusyFor. 0: never pause.
	PauseWhenBusy float64
}

// DefaultTaskDisk is what one task's work folder may hold when p2pc join
// has no --disk.
const DefaultTaskDisk = 4 << 30

// BusyFor is how long the machine must stay busy (or quiet) before
// tasks pause (or resume); busySample is how often it is measured.
const (
	BusyFor    = 3 * time.Second
	busySample = time.Second
)

// taskLimits are the limits of one task of a job that needs memory
// bytes (0: no requirement).
func (n *Node) taskLimits(memory int64) sandbox.Limits {
	v := n.cfg.Volunteer
	slots := int64(max(n.allSlots(), 1))
	l := sandbox.Limits{Memory: memory, Idle: v.Idle, FileSize: n.taskDisk()}
	if l.Memory <= 0 && v.Memory > 0 {
		l.Memory = min(v.Memory/slots, sandbox.DefaultMemory)
	}
	return l
}

// taskDisk is what one task's work folder may hold.
func (n *Node) taskDisk() int64 {
	if d := n.cfg.Volunteer.Disk; d > 0 {
		return max(d/int64(max(n.allSlots(), 1)), 1)
	}
	return DefaultTaskDisk
}

// storeOptions are the block store's options: with --disk the store
// holds at most that much, evicting blocks no job pins, least recently
// used first, and refusing what still does not fit (blocks.ErrFull).
func (v Volunteer) storeOptions(log *slog.Logger) blocks.DiskOptions {
	return blocks.DiskOptions{Logger: log, MaxBytes: v.Disk, Hard: v.Disk > 0}
}

// storeFull explains err when the block store refused something for its
// cap (err unchanged otherwise).
func (n *Node) storeFull(err error) error {
	var fe *blocks.FullError
	if !errors.As(err, &fe) {
		return err
	}
	return fmt.Errorf("%w: this peer's block store holds at most %s (p2pc join --disk), %s of it pinned by jobs or in use, %s more needed",
		err, sandbox.FormatSize(fe.Cap), sandbox.FormatSize(fe.Held), sandbox.FormatSize(fe.Need))
}

// misfit says why a job's tasks do not fit on this peer ("" if they
// do): the job's resources (and the size of its plugin and inputs, as
// disk) are admitted by the peer's offer (offer.go), the one check.
func (n *Node) misfit(h *peerpb.Hello) string {
	need := h.Resources.Spec()
	for _, f := range append([]*peerpb.FileRef{h.Plugin}, h.Inputs...) {
		need.Disk += f.GetSize()
	}
	if ok, why := n.offer().Admit(need); !ok {
		return why.Reason("this peer", offerFlags[why.Key])
	}
	return ""
}

// offerFlags name the p2pc join flag behind each capped resource.
var offerFlags = map[string]string{"memory": "--memory", "cpus": "--cpus", "disk": "--disk", "gpus": "p2pc join --gpus"}

// cpus is how many CPUs this peer's tasks may use.
func (n *Node) cpus() float64 {
	if c := n.cfg.Volunteer.CPUs; c > 0 {
		return min(c, float64(runtime.NumCPU()))
	}
	return float64(runtime.NumCPU())
}

// applyVolunteer sets the caps for all tasks together on this process's
// cgroup tree. It returns what could not be applied.
func (n *Node) applyVolunteer() error {
	v := n.cfg.Volunteer
	if v.CPUs <= 0 && v.Memory <= 0 {
		return nil
	}
	if err := sandbox.SetShare(v.CPUs, v.Memory); err != nil {
		return fmt.Errorf("--cpus/--memory: %w", err)
	}
	return nil
}

// Paused reports whether the peer's tasks are paused (--pause-when-busy).
func (n *Node) Paused() bool {
	n.sched.mu.Lock()
	defer n.sched.mu.Unlock()
	return n.sched.paused
}

// setPaused pauses (or resumes) taking and starting leases.
func (s *sched) setPaused(on bool) {
	s.mu.Lock()
	s.paused = on
	if !on {
		s.topUpLocked()
	}
	s.mu.Unlock()
	s.wakeAll()
}

// watchBusy pauses the peer's tasks while the machine is busy with
// other work, until ctx ends.
func (n *Node) watchBusy(ctx context.Context) {
	pct := n.cfg.Volunteer.PauseWhenBusy
	if pct <= 0 {
		return
	}
	m := &busyMeter{pct: pct, need: int(BusyFor / busySample)}
	var last cpuSample
	t := time.NewTicker(busySample)
	defer t.Stop()
	defer func() {
		if m.paused {
			sandbox.Freeze(false)
			n.sched.setPaused(false)
		}
	}()
	for {
		other, ok, err := otherCPU(&last)
		if err != nil {
			n.log.Warn("--pause-when-busy: cannot measure the machine's CPU use; not pausing", "err", err)
			return
		}
		if ok {
			if changed, paused := m.add(other); changed {
				n.pause(paused, other)
			}
		}
		n.giveUpPaused()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pausedTooLong says whether the peer should give up lease it at now:
// frozen since it came (the tasks' frozen time is frozen, it was frozen0
// then), older than its task timeout plus half the coordinator's grace
// (the margin: the coordinator's clock started first, and this check
// runs once a second), and not given up yet.
func pausedTooLong(it *queued, frozen time.Duration, now time.Time, timeout time.Duration) bool {
	return frozen > it.frozen0 && now.Sub(it.admitted) >= timeout+peerpb.LeaseGrace/2 && !it.paused.Load()
}

// testBusyFile (P2PC_TEST_BUSY_FILE, for tests only: not a user
// setting) names a file whose number stands for the other programs' CPU
// use (percent) instead of /proc/stat, so that a test can make the
// machine look busy without loading a shared machine.
var testBusyFile = os.Getenv("P2PC_TEST_BUSY_FILE")

// otherCPU is the CPU use (percent of the machine) of everything but
// this peer and its tasks since the sample in last, which it updates;
// ok is false for the first sample.
func otherCPU(last *cpuSample) (pct float64, ok bool, err error) {
	if testBusyFile != "" {
		b, err := os.ReadFile(testBusyFile)
		if err != nil {
			return 0, true, nil // no file: quiet
		}
		pct, err = strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		return pct, err == nil, nil
	}
	cur, err := sampleCPU()
	if err != nil {
		return 0, false, err
	}
	pct, ok = last.otherPct(cur), last.total > 0
	*last = cur
	return pct, ok, nil
}

// errPausedLease is the error of a lease the peer gave up for a pause.
const errPausedLease = "paused on this peer until near the lease's end (its owner's machine was busy: --pause-when-busy); to run again"

// giveUpPaused ends, as canceled, every lease of this peer that was
// frozen (sandbox.Freeze) while it waited or ran, and that comes near the
// coordinator's backstop: the task's timeout plus peerpb.LeaseGrace on
// the wall clock. The task's own timeout does not count frozen time
// (pluginhost), but the backstop does, and a lease the coordinator
// revokes there is charged to the peer as lost, a strike, as if the peer
// were dead. Given back before, the lease comes back as canceled: no
// strike and no failed attempt, the coordinator runs the task again
// (elsewhere, while this peer is paused), and the peer was merely slow.
func (n *Node) giveUpPaused() {
	frozen := sandbox.FrozenTime()
	n.sched.mu.Lock()
	sessions := slices.Clone(n.sched.sessions)
	n.sched.mu.Unlock()
	for _, s := range sessions {
		s.mu.Lock()
		var late []*queued
		for _, it := range s.active {
			if pausedTooLong(it, frozen, time.Now(), s.timeout) {
				late = append(late, it)
			}
		}
		s.mu.Unlock()
		for _, it := range late {
			it.paused.Store(true)
			s.log.Info("lease given back: paused until near its end", "lease", it.lease.LeaseId, "task", it.lease.TaskId, "timeout", s.timeout)
			it.cancel() // a running task is killed, frozen or not
			if s.n.sched.unqueue(s, it.lease.LeaseId) {
				s.finish(it, &peerpb.Result{LeaseId: it.lease.LeaseId, Outcome: report.OutcomeCanceled, Error: errPausedLease})
			}
		}
	}
}

// pause freezes the tasks and stops taking leases, or the reverse.
func (n *Node) pause(on bool, otherPct float64) {
	if on {
		n.sched.setPaused(true)
		err := sandbox.Freeze(true)
		n.log.Info("machine busy: tasks paused", "other_cpu_pct", int(otherPct), "threshold", n.cfg.Volunteer.PauseWhenBusy, "freeze_err", err)
		return
	}
	err := sandbox.Freeze(false)
	n.sched.setPaused(false)
	n.log.Info("machine quiet: tasks resumed", "other_cpu_pct", int(otherPct), "thaw_err", err)
}

// busyMeter decides when to pause: after need samples in a row above
// pct, and to resume after need samples in a row at or below it.
type busyMeter struct {
	pct    float64
	need   int
	run    int // samples in a row on the other side of the threshold
	paused bool
}

// add takes one sample of the other programs' CPU use (percent of the
// machine) and reports whether the state changed, and the state.
func (m *busyMeter) add(other float64) (changed, paused bool) {
	if (other > m.pct) != m.paused {
		m.run++
	} else {
		m.run = 0
	}
	if m.run >= max(m.need, 1) {
		m.paused, m.run = !m.paused, 0
		return true, m.paused
	}
	return false, m.paused
}

// cpuSample is the machine's CPU time (from /proc/stat) and the part of
// it this process and its tasks used, in nanoseconds.
type cpuSample struct {
	total, busy, ours int64
}

// otherPct is the share of the machine's CPU, in percent, that others
// than this peer and its tasks used between s and cur.
func (s cpuSample) otherPct(cur cpuSample) float64 {
	total := cur.total - s.total
	if total <= 0 {
		return 0
	}
	other := (cur.busy - s.busy) - (cur.ours - s.ours)
	return max(0, min(100, 100*float64(other)/float64(total)))
}

// clockTick is USER_HZ, the unit of /proc/stat (100 on every Linux
// architecture Go supports).
const clockTick = int64(time.Second / 100)

func sampleCPU() (cpuSample, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}, err
	}
	total, busy, err := parseProcStat(b)
	if err != nil {
		return cpuSample{}, err
	}
	s := cpuSample{total: total * clockTick, busy: busy * clockTick}
	if u, err := sandbox.CPUUsage(); err == nil {
		s.ours = int64(u)
	}
	if self, err := os.ReadFile("/proc/self/stat"); err == nil {
		s.ours += selfCPU(self) * clockTick
	}
	return s, nil
}

// parseProcStat reads the "cpu" line of /proc/stat: all jiffies, and
// those not idle or waiting for I/O.
func parseProcStat(b []byte) (total, busy int64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[0] != "cpu" {
			continue
		}
		for i, x := range f[1:] {
			if i >= 8 { // guest time is already in user
				break
			}
			v, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/stat: %w", err)
			}
			total += v
			if i != 3 && i != 4 { // idle, iowait
				busy += v
			}
		}
		return total, busy, nil
	}
	return 0, 0, fmt.Errorf("/proc/stat: no cpu line")
}

// selfCPU is utime+stime of /proc/self/stat, in jiffies.
func selfCPU(b []byte) int64 { return statTicks(b, 2) }

// statTicks sums n fields of a /proc/PID/stat from utime (field 14) on:
// 2, utime+stime; 4, with the waited-for children's; in jiffies.
func statTicks(b []byte, n int) int64 {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 11+n {
		return 0
	}
	var ticks int64
	for _, x := range f[11 : 11+n] {
		v, _ := strconv.ParseInt(x, 10, 64)
		ticks += v
	}
	return ticks
}
