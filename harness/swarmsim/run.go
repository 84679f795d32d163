package swarmsim

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/trust"
)

// Config is one simulated run: a real `p2pc run` coordinator against
// Peers light peers.
type Config struct {
	// Bin is the p2pc binary, Plugin the echo plugin's executable (the
	// coordinator publishes it; light peers never start it).
	Bin, Plugin string
	// Dir is a scratch folder (data, config, spec, output).
	Dir string
	// Peers of Slots slots each; Tasks tasks that wait TaskTime each on
	// their peer.
	Peers, Slots, Tasks int
	TaskTime            time.Duration
	// Latency delays each write of a light peer (its TLS flights, its
	// answers): a link's latency, on loopback.
	Latency time.Duration
	// Silent: the last Silent peers answer no Info call (they are not
	// found) until every other peer got its Hello.
	Silent int
	// Timeout bounds the run (default 2 minutes).
	Timeout time.Duration
	// Args are more arguments for p2pc run (before the spec), such as
	// --cpuprofile FILE.
	Args []string
	// KeepLog keeps p2pc run's stderr in Result.Log.
	KeepLog bool
	Logger  *slog.Logger
}

// Result is what one run measured.
type Result struct {
	Peers, Slots, Tasks int
	TaskTime            time.Duration
	// Leased: how many peers got a lease; EnrolS: from p2pc run's start
	// to the last of them getting its first lease.
	Leased int
	Enrol  time.Duration
	// Span: the first lease to the last result, at the peers; Rate the
	// tasks per second over it, Ideal Peers*Slots/TaskTime (0 for no-op
	// tasks).
	Span        time.Duration
	Rate, Ideal float64
	// Wall: p2pc run's start to its exit.
	Wall time.Duration
	// CoordCPU: p2pc run's CPU time over its life; CPUAtLeased up to
	// every peer holding a lease.
	CoordCPU, CPUAtLeased time.Duration
	// RSS: p2pc run's peak resident memory (VmHWM) in bytes, read just
	// before it exits; RSSAtLeased its VmRSS when every peer held a lease.
	RSS, RSSAtLeased int64
	// SimCPU: this process's CPU time (the light peers, and the sampler)
	// over the run, for the load beside the figures.
	SimCPU time.Duration
	// Done counts the results the peers sent.
	Done int64
	// With Config.Silent: LastHello is when the last peer that was not
	// silent got its Hello, SilentGaveUp when the coordinator first gave
	// up asking a silent peer (0: it never did), from p2pc run's start.
	LastHello, SilentGaveUp time.Duration
	// Leases are the times from p2pc run's start to each peer's first
	// lease, in order; Hellos to each peer's first Hello (the job's
	// offer, once the coordinator published the job and resolved the
	// peer).
	Leases, Hellos []time.Duration
	// Log is p2pc run's stderr, with Config.KeepLog.
	Log string
}

// Run starts the light peers, then p2pc run with their addresses
// (--join, no mDNS, no local slot), and waits until it exits. It fails
// if p2pc run fails, or if a peer got no lease.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 1
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	secret, err := trust.NewSecret()
	if err != nil {
		return nil, fmt.Errorf("swarmsim: %w", err)
	}
	specPath := filepath.Join(cfg.Dir, "job.yaml")
	spec := fmt.Sprintf("name: swarmsim\nplugin: %s\ntasks:\n  - range: {param: i, from: 0, to: %d}\ntimeout: 1m\n", cfg.Plugin, cfg.Tasks-1)
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		return nil, fmt.Errorf("swarmsim: write the spec: %w", err)
	}
	sw, err := StartSwarm(secret, cfg.Peers, cfg.Slots, cfg.TaskTime, cfg.Latency, cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer sw.Close()
	if cfg.Silent > 0 {
		sw.silence(cfg.Silent)
	}
	selfCPU0, _ := harness.ProcCPU(os.Getpid())
	args := []string{"run", "--no-mdns", "--local-slots", "0", "--listen", "127.0.0.1:0", "--no-progress",
		"--join", strings.Join(sw.Addrs(), ","), "--out", filepath.Join(cfg.Dir, "out")}
	args = append(append(args, cfg.Args...), specPath)
	start := time.Now()
	proc, err := harness.Start(cfg.Bin, args, harness.Options{Dir: cfg.Dir, Name: "p2pc run", Env: []string{
		"P2PC_SWARM=" + secret.Token(), "P2PC_DATA=" + filepath.Join(cfg.Dir, "data"),
		"XDG_CONFIG_HOME=" + filepath.Join(cfg.Dir, "config"), "P2PC_LOG_LEVEL=warn"}})
	if err != nil {
		return nil, fmt.Errorf("swarmsim: %w", err)
	}
	defer proc.Kill()
	res := &Result{Peers: cfg.Peers, Slots: cfg.Slots, Tasks: cfg.Tasks, TaskTime: cfg.TaskTime}
	// Sample until every peer holds a lease, then only watch the memory
	// until p2pc run exits.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var hwm int64
	for done := false; !done; {
		select {
		case <-ctx.Done():
			n, _ := sw.Leased()
			return nil, fmt.Errorf("swarmsim: %d peers: p2pc run did not end within %v (%d peers leased, %d results; stderr: %s)",
				cfg.Peers, cfg.Timeout, n, sw.Tasks(), tail(proc.Stderr()))
		case <-proc.Done():
			done = true
		case <-tick.C:
		}
		sw.speak()
		pid := proc.Pid()
		if m, err := procMemory(pid); err == nil {
			hwm = max(hwm, m.hwm)
			if res.CPUAtLeased == 0 {
				if n, _ := sw.Leased(); n == cfg.Peers {
					res.CPUAtLeased, _ = harness.ProcCPU(pid)
					res.RSSAtLeased = m.rss
				}
			}
		}
	}
	res.Wall = time.Since(start)
	res.CoordCPU = proc.CPUTime()
	res.RSS = hwm
	selfCPU1, _ := harness.ProcCPU(os.Getpid())
	res.SimCPU = selfCPU1 - selfCPU0
	code, _ := proc.Wait(time.Second)
	n, last := sw.Leased()
	res.Leased = n
	if n > 0 {
		res.Enrol = last.Sub(start)
	}
	res.Leases = sw.firstLeases(start)
	res.Hellos = sw.firstHellos(start)
	if t := sw.lastHello(); !t.IsZero() {
		res.LastHello = t.Sub(start)
	}
	if t := sw.gaveUp(); !t.IsZero() {
		res.SilentGaveUp = t.Sub(start)
	}
	res.Done = sw.Tasks()
	if cfg.KeepLog {
		res.Log = proc.Stderr()
	}
	first, end := sw.Span()
	if !first.IsZero() && end.After(first) {
		res.Span = end.Sub(first)
		res.Rate = float64(sw.Tasks()) / res.Span.Seconds()
	}
	if cfg.TaskTime > 0 {
		res.Ideal = float64(cfg.Peers*cfg.Slots) / cfg.TaskTime.Seconds()
	}
	if code != 0 {
		return res, fmt.Errorf("swarmsim: %d peers: p2pc run exited with %d: %s", cfg.Peers, code, tail(proc.Stderr()))
	}
	if n < cfg.Peers {
		return res, fmt.Errorf("swarmsim: %d of %d peers got no lease (%s ...)", cfg.Peers-n, cfg.Peers, strings.Join(sw.Unleased(5), ", "))
	}
	if err := sw.Err(); err != nil {
		return res, fmt.Errorf("swarmsim: the light peers: %w", err)
	}
	return res, nil
}

// tail is the end of a process's output, for an error.
func tail(s string) string {
	const max = 2000
	if len(s) > max {
		s = "..." + s[len(s)-max:]
	}
	return strings.TrimSpace(s)
}

// Build compiles p2pc (as a user builds it) and the echo plugin of the
// repository at root into dir, and returns their paths.
func Build(ctx context.Context, root, dir string) (bin, plugin string, err error) {
	bin, plugin = filepath.Join(dir, "p2pc"), filepath.Join(dir, "echo")
	if err := harness.BuildRelease(ctx, root, bin); err != nil {
		return "", "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", plugin, "./plugins/echo")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("build the echo plugin: %w\n%s", err, b)
	}
	return bin, plugin, nil
}
