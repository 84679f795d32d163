// Command swarmsim measures the coordinator against many light peers
// (package harness/swarmsim): for each swarm size, a fresh `p2pc run`
// (built from this repository as a user builds it) with that many
// in-process peers on loopback, and one line of figures.
//
//	go run ./harness/swarmsim/cmd/swarmsim -peers 8,96,1000 -tasks 4096 -task-ms 20
//
// The figures go to stdout as a markdown table, with the load average
// before and after each run; -rounds repeats each size.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/harness/swarmsim"
)

func main() {
	peers := flag.String("peers", "8,96,1000", "swarm sizes, comma-separated")
	slots := flag.Int("slots", 1, "slots per light peer")
	tasks := flag.Int("tasks", 4096, "tasks per run")
	taskMS := flag.Int("task-ms", 20, "each task's wait on its peer, in milliseconds (0: no-op)")
	rounds := flag.Int("rounds", 1, "runs per size")
	timeout := flag.Duration("timeout", 3*time.Minute, "bound on each run")
	logLevel := flag.String("log", "", "p2pc run's log level; its log goes to FILE-PEERS-ROUND.log beside -cpuprofile's, or swarmsim-PEERS-ROUND.log")
	latency := flag.Duration("latency", 0, "delay before each write of a light peer: a link's latency")
	binFlag := flag.String("bin", "", "the p2pc binary to measure (default: build ./cmd/p2pc of this repository)")
	extra := flag.String("run-args", "", "more arguments for p2pc run, space-separated (e.g. --trace-phases)")
	profile := flag.String("cpuprofile", "", "write p2pc run's CPU profile of each run to FILE-PEERS-ROUND")
	flag.Parse()
	cpuProfile, runLog, runArgs, p2pcBin, linkLatency = *profile, *logLevel, strings.Fields(*extra), *binFlag, *latency
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *peers, *slots, *tasks, *taskMS, *rounds, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "swarmsim:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, sizes string, slots, tasks, taskMS, rounds int, timeout time.Duration) error {
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "swarmsim-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, plugin, err := swarmsim.Build(ctx, root, dir)
	if err != nil {
		return err
	}
	if p2pcBin != "" {
		bin = p2pcBin
	}
	fmt.Println("| peers | round | leased | start to all leased | tasks/s | ideal | coordinator CPU s (at all leased) | CPU ms per peer | peak RSS MiB | RSS KiB per peer | light peers' CPU s | wall s | load before / after |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-peers: %q is not a count", s)
		}
		for r := range rounds {
			runDir := filepath.Join(dir, fmt.Sprintf("run-%d-%d", n, r))
			if err := os.MkdirAll(runDir, 0o755); err != nil {
				return err
			}
			args := runArgs
			if cpuProfile != "" {
				p, err := filepath.Abs(fmt.Sprintf("%s-%d-%d", cpuProfile, n, r+1))
				if err != nil {
					return err
				}
				args = []string{"--cpuprofile", p}
			}
			if runLog != "" {
				args = append(args, "--log-level", runLog)
			}
			before := loadavg()
			res, err := swarmsim.Run(ctx, swarmsim.Config{Bin: bin, Plugin: plugin, Dir: runDir, Peers: n, Slots: slots,
				Tasks: tasks, TaskTime: time.Duration(taskMS) * time.Millisecond, Timeout: timeout, Latency: linkLatency, Args: args, KeepLog: runLog != ""})
			if res != nil && runLog != "" {
				base := cpuProfile
				if base == "" {
					base = "swarmsim"
				}
				if err := os.WriteFile(fmt.Sprintf("%s-%d-%d.log", base, n, r+1), []byte(res.Log), 0o644); err != nil {
					return err
				}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "%d peers, round %d: first Hellos at p10 %v, p50 %v, p90 %v, last %v; first leases at p10 %v, p50 %v, p90 %v, last %v\n", n, r+1,
				pct(res.Hellos, 10), pct(res.Hellos, 50), pct(res.Hellos, 90), pct(res.Hellos, 100),
				pct(res.Leases, 10), pct(res.Leases, 50), pct(res.Leases, 90), pct(res.Leases, 100))
			ideal := "-"
			if res.Ideal > 0 {
				ideal = fmt.Sprintf("%.0f", res.Ideal)
			}
			fmt.Printf("| %d | %d | %d | %.2f s | %.0f | %s | %.2f (%.2f) | %.2f | %.0f | %.0f | %.2f | %.2f | %s / %s |\n",
				n, r+1, res.Leased, res.Enrol.Seconds(), res.Rate, ideal, res.CoordCPU.Seconds(), res.CPUAtLeased.Seconds(),
				float64(res.CoordCPU.Milliseconds())/float64(n), float64(res.RSS)/(1<<20), float64(res.RSS)/1024/float64(n),
				res.SimCPU.Seconds(), res.Wall.Seconds(), before, loadavg())
			os.RemoveAll(runDir)
		}
	}
	return nil
}

// pct is the p-th percentile of sorted d (nearest rank).
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := max((len(d)*p+99)/100-1, 0)
	return d[i].Round(time.Millisecond)
}

// cpuProfile is -cpuprofile.
var (
	cpuProfile, runLog string
	runArgs            []string
	p2pcBin            string
	linkLatency        time.Duration
)

// loadavg is the one-minute load average, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
