package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// coreFiller keeps cores busy at the lowest priority there is: one
// spinning shell per core, pinned to it, under SCHED_IDLE in a cgroup of
// the least CPU weight, so that it runs only when nothing else on the core
// wants to.
//
// Why: a peer's capacity is a CFS quota, and when a throttled peer leaves
// its core with nothing to run, the core halts; on a virtual machine the
// wake-up at the next quota period comes late, and the peer gets
// noticeably less than its quota (on the 2-vCPU machine of results/, a
// 0.3-core busy loop did 13-20% less work alone on its core than beside
// an idle-priority spinner). A peer measured alone shares its core with
// nobody and halts most; together, peers pinned to one core fill each
// other's gaps. The solo rates came out low, and efficiencies above 100%.
// With every core kept busy a peer gets its quota alone and together
// alike.
type coreFiller struct {
	dir  string
	cmds []*exec.Cmd
}

// startCoreFiller starts a spinner on each of cores.
func startCoreFiller(cores []int) (*coreFiller, error) {
	ctl, err := harness.FindCPUController()
	if err != nil {
		return nil, fmt.Errorf("core filler: %w", err)
	}
	name, err := harness.LabName("0-filler")
	if err != nil {
		return nil, fmt.Errorf("core filler: %w", err)
	}
	f := &coreFiller{dir: filepath.Join(ctl.Root, name)}
	if err := os.Mkdir(f.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("core filler: %w", err)
	}
	weight, val := "cpu.shares", "2" // v1: the least
	if ctl.Version == 2 {
		weight, val = "cpu.weight", "1"
	}
	if err := os.WriteFile(filepath.Join(f.dir, weight), []byte(val), 0o644); err != nil {
		f.stop()
		return nil, fmt.Errorf("core filler: %w", err)
	}
	procs := filepath.Join(f.dir, "cgroup.procs")
	for _, c := range cores {
		// The shell moves itself into the cgroup before it spins.
		cmd := exec.Command("sh", "-c", `echo $$ > "$1" && exec taskset -c "$2" chrt --idle 0 sh -c 'while :; do :; done'`, "filler", procs, strconv.Itoa(c))
		cmd.SysProcAttr = procGroup()
		if err := cmd.Start(); err != nil {
			f.stop()
			return nil, fmt.Errorf("core filler: %w", err)
		}
		f.cmds = append(f.cmds, cmd)
	}
	// Wait until the spinners got going: every process in the cgroup runs
	// under SCHED_IDLE (so taskset and chrt exist and worked), as many as
	// cores. A spinner that failed leaves the cgroup, and the wait ends at
	// its deadline.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(procs)
		pids := splitLines(string(b))
		if len(pids) >= len(cores) && allIdle(pids) {
			return f, nil
		}
		if time.Now().After(deadline) {
			f.stop()
			return nil, fmt.Errorf("core filler: %d of %d spinners running under SCHED_IDLE after 5s (taskset, chrt?)", len(pids), len(cores))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// allIdle: every process of pids runs under SCHED_IDLE (policy 5, the
// 41st field of /proc/<pid>/stat).
func allIdle(pids []string) bool {
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return false
		}
		// Fields after the command name, which may hold spaces: state is
		// field 3, policy field 41.
		rest := string(b[bytes.LastIndexByte(b, ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 39 || f[38] != "5" {
			return false
		}
	}
	return true
}

// stop ends the spinners this filler started and removes its cgroup.
func (f *coreFiller) stop() {
	if f == nil {
		return
	}
	for _, cmd := range f.cmds {
		if cmd.Process != nil {
			_ = killGroupNow(cmd.Process.Pid) // its process group
			_ = cmd.Wait()
		}
	}
	f.cmds = nil
	for range 50 { // the cgroup empties once the killed spinners are reaped
		if err := os.Remove(f.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := range len(s) {
		if s[i] == '\n' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
