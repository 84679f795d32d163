package benchmarks

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

// Dispatch benchmarks (issue 4): real `p2pc join` processes on 127.0.0.1
// (--no-mdns; the submitter is given their addresses with --join) and a
// real `p2pc run` per iteration, so what is measured is the program users
// run. Per-task times come from report.json: an attempt starts when the
// coordinator issues the lease and ends when the peer has finished the
// task.
//
//	go test ./benchmarks -run '^$' -bench Dispatch -benchtime 10x
//
// With P2PC_BENCH_CPUPROFILE=DIR each `p2pc run` writes a CPU profile
// into DIR (run-<n>.pprof, and its report as run-<n>.report.json; read it with `go tool pprof -top BIN FILE`,
// BIN being DIR/p2pc, kept there too), and each peer one (peerNN.pprof)
// covering its whole life. P2PC_BENCH_JOIN_ARGS adds flags to every
// peer's `p2pc join` (e.g. --no-idle). With P2PC_BENCH_PHASES=1 each
// `p2pc run` is given --trace-phases and its phases are logged (-v).

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildEcho string
	buildErr  error
)

// binaries builds p2pc and the echo plugin once per test binary.
func binaries(b *testing.B) (bin, echo string) {
	b.Helper()
	buildOnce.Do(func() {
		root, err := harness.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", "p2pc-dispatch-bench-"); buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "p2pc")
		buildEcho = filepath.Join(buildDir, "echo")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if buildErr = harness.Build(ctx, root, buildBin, false); buildErr != nil {
			return
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-o", buildEcho, "./plugins/echo")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build echo: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return buildBin, buildEcho
}

func TestMain(m *testing.M) {
	// The p2pc processes the tests start are members of one fresh swarm;
	// nothing is written to the user's config folder.
	cfg, err := os.MkdirTemp("", "p2pc-swarm-")
	if err != nil {
		panic(err)
	}
	if _, err := harness.UseTestSwarm(cfg); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(cfg)
	if buildDir != "" && os.Getenv("P2PC_BENCH_CPUPROFILE") == "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// heavy skips a benchmark whose iteration is a whole job when the
// requested iteration count would take far too long (`just bench` asks
// 2000x of every benchmark for the micro-benchmarks).
func heavy(b *testing.B) {
	b.Helper()
	if f := flag.Lookup("test.benchtime"); f != nil {
		if n, err := strconv.Atoi(strings.TrimSuffix(f.Value.String(), "x")); err == nil && n > 50 {
			b.Skipf("one iteration is a whole p2pc job: -benchtime %s would take hours; use -benchtime 5x", f.Value)
		}
	}
}

var listenRe = regexp.MustCompile(`listening (\S+) name (\S+)`)

// swarm starts peers x slots `p2pc join` processes on loopback and
// returns their addresses; peerPIDs records their pids.
func swarm(b *testing.B, bin string, peers, slots int) []string {
	b.Helper()
	dir := b.TempDir()
	var addrs []string
	var procs []*harness.Proc
	for i := range peers {
		name := fmt.Sprintf("peer%02d", i+1)
		var prof []string // each peer's profile too, written when it stops
		if pd := os.Getenv("P2PC_BENCH_CPUPROFILE"); pd != "" {
			prof = []string{"--cpuprofile", filepath.Join(pd, name+".pprof")}
		}
		args := append(prof, "--data", filepath.Join(dir, name), "join", "--name", name,
			"--slots", strconv.Itoa(slots), "--listen", "127.0.0.1:0", "--no-mdns")
		// P2PC_BENCH_JOIN_ARGS: more join flags, e.g. --no-idle for the
		// cost of idle priority apart from the rest of confinement.
		args = append(args, strings.Fields(os.Getenv("P2PC_BENCH_JOIN_ARGS"))...)
		p, err := harness.Start(bin, args,
			harness.Options{Name: name, Env: []string{"TMPDIR=" + dir}}) // plugin pools' folders go with dir
		if err != nil {
			b.Fatal(err)
		}
		procs = append(procs, p)
		peerPIDs = append(peerPIDs, p.Pid())
	}
	b.Cleanup(func() {
		peerPIDs = nil
		var wg sync.WaitGroup
		grace := 2 * time.Second
		if os.Getenv("P2PC_BENCH_CPUPROFILE") != "" {
			grace = 20 * time.Second // a killed peer writes no profile
		}
		for _, p := range procs {
			wg.Go(func() { p.Stop(grace) })
		}
		wg.Wait()
		for _, p := range procs {
			if err := p.CheckLogs(); err != nil {
				b.Error(err)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range procs {
		m, err := p.WaitOutput(ctx, listenRe)
		if err != nil {
			b.Fatal(err)
		}
		addrs = append(addrs, m[1])
	}
	return addrs
}

// echoSpec writes a job of n echo tasks (sleep_ms > 0: each sleeps).
func echoSpec(b *testing.B, echo string, n, sleepMS int) string {
	b.Helper()
	spec := filepath.Join(b.TempDir(), "echo.yaml")
	body := fmt.Sprintf("name: dispatch\nplugin: %s\nparams: {sleep_ms: %d}\ntasks:\n  - range: {param: i, from: 0, to: %d}\ntimeout: 1m\n", echo, sleepMS, n-1)
	if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	return spec
}

// batchOff returns a copy of spec whose tasks run one per plugin call.
func batchOff(b *testing.B, spec string) string {
	b.Helper()
	body, err := os.ReadFile(spec)
	if err != nil {
		b.Fatal(err)
	}
	off := filepath.Join(b.TempDir(), "off.yaml")
	if err := os.WriteFile(off, append(body, "batch: off\n"...), 0o644); err != nil {
		b.Fatal(err)
	}
	return off
}

var (
	runSeq   int
	peerPIDs []int
	lastCPU  time.Duration // the last submit's coordinator CPU time
)

// treeStat sums the CPU time (user + system, from /proc) of the processes
// pids (the peers) and, separately, of their children (plugin processes),
// and returns the set of the children's pids.
func treeStat(pids []int) (peers, children time.Duration, kids map[int]bool) {
	kids = map[int]bool{}
	want := map[int]bool{}
	for _, p := range pids {
		want[p] = true
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, cpu, err := harness.ProcStat(pid)
		switch {
		case err != nil:
		case want[pid]:
			peers += cpu
		case want[ppid]:
			children += cpu
			kids[pid] = true
		}
	}
	return peers, children, kids
}

// ctxSwitches sums the context switches (voluntary and not) of every
// thread of the processes pids.
func ctxSwitches(pids []int) (n int64) {
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/task"
		threads, _ := os.ReadDir(dir)
		for _, th := range threads {
			b, _ := os.ReadFile(filepath.Join(dir, th.Name(), "status"))
			for _, l := range strings.Split(string(b), "\n") {
				if _, v, ok := strings.Cut(l, "ctxt_switches:"); ok {
					k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					n += k
				}
			}
		}
	}
	return n
}

func keys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// submit runs the job on the swarm and returns its report and wall time.
func submit(b *testing.B, bin, spec string, addrs []string, data string) (*report.Report, time.Duration) {
	b.Helper()
	out := filepath.Join(b.TempDir(), "out")
	args := []string{"--data", data}
	if dir := os.Getenv("P2PC_BENCH_CPUPROFILE"); dir != "" {
		runSeq++
		args = append(args, "--cpuprofile", filepath.Join(dir, fmt.Sprintf("run-%d.pprof", runSeq)))
		_ = exec.Command("cp", bin, filepath.Join(dir, "p2pc")).Run()
	}
	args = append(args, "run", spec, "--out", out, "--local-slots", "0", "--no-progress", "--no-mdns",
		"--listen", "127.0.0.1:0", "--join", strings.Join(addrs, ","))
	trace := os.Getenv("P2PC_BENCH_PHASES") != ""
	if trace {
		// Where the whole command's time goes (issue 16): logged below.
		args = append(args, "--trace-phases")
	}
	start := time.Now()
	p, err := harness.Start(bin, args, harness.Options{Name: "p2pc run"})
	if err != nil {
		b.Fatal(err)
	}
	code, err := p.Wait(5 * time.Minute)
	wall := time.Since(start)
	lastCPU = p.CPUTime()
	if err != nil || code != 0 {
		b.Fatalf("p2pc run: exit %d, %v\n%s", code, err, p.Stderr())
	}
	if trace {
		var phases []string
		for _, l := range strings.Split(p.Stderr(), "\n") {
			if strings.HasPrefix(l, "phase ") {
				phases = append(phases, l)
			}
		}
		b.Logf("p2pc run's phases (wall %s):\n%s", wall.Round(time.Millisecond), strings.Join(phases, "\n"))
	}
	rep, err := report.Read(out)
	if err != nil {
		b.Fatal(err)
	}
	if rep.Summary.Done != rep.Summary.Total {
		b.Fatalf("%d of %d tasks done", rep.Summary.Done, rep.Summary.Total)
	}
	if dir := os.Getenv("P2PC_BENCH_CPUPROFILE"); dir != "" {
		// The run's report beside its profile: attempts, backup copies.
		if j, err := json.Marshal(rep); err == nil {
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("run-%d.report.json", runSeq)), j, 0o644)
		}
	}
	return rep, wall
}

// latencies are the accepted attempts' lease-to-end times, and the span
// from the first lease to the last end.
func latencies(rep *report.Report) (lat []time.Duration, first, last time.Time) {
	for _, t := range rep.Tasks {
		for _, a := range t.Attempts {
			if first.IsZero() || a.Start.Before(first) {
				first = a.Start
			}
			if a.Outcome == report.OutcomeOK {
				lat = append(lat, a.End.Sub(a.Start))
				if a.End.After(last) {
					last = a.End
				}
			}
		}
	}
	return lat, first, last
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func quantile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := q * float64(len(sorted)-1)
	lo := int(pos)
	hi := min(lo+1, len(sorted)-1)
	return ms(sorted[lo]) + (ms(sorted[hi])-ms(sorted[lo]))*(pos-float64(lo))
}

func reportLatency(b *testing.B, all []time.Duration) {
	slices.Sort(all)
	var sum, ss float64
	for _, d := range all {
		sum += ms(d)
	}
	mean := sum / float64(len(all))
	for _, d := range all {
		ss += (ms(d) - mean) * (ms(d) - mean)
	}
	sd := 0.0
	if len(all) > 1 {
		sd = math.Sqrt(ss / float64(len(all)-1))
	}
	b.ReportMetric(mean, "mean-ms")
	b.ReportMetric(sd, "sd-ms")
	b.ReportMetric(quantile(all, 0.50), "p50-ms")
	b.ReportMetric(quantile(all, 0.99), "p99-ms")
}

// BenchmarkDispatchLatency: Preon 4.3's setup (200 echo tasks
// dispatched at once to 10 peers x 20 slots) and, for the unloaded cost
// of one dispatch, 1 peer x 1 slot taking the tasks one after another,
// one task at a time (batch=off) and batched as by default (there a
// task's lease to end holds its wait behind its batch's earlier tasks).
// One iteration is one job; the metrics pool every task of every
// iteration. Targets (issue 4): p50 < 1 ms, p99 < 5 ms.
func BenchmarkDispatchLatency(b *testing.B) {
	for _, c := range []struct {
		peers, slots, tasks int
		off                 bool
	}{{10, 20, 200, false}, {1, 1, 200, false}, {1, 1, 200, true}} {
		name := fmt.Sprintf("peers=%d/slots=%d/tasks=%d", c.peers, c.slots, c.tasks)
		if c.off {
			name += "/batch=off"
		}
		b.Run(name, func(b *testing.B) {
			heavy(b)
			bin, echo := binaries(b)
			addrs := swarm(b, bin, c.peers, c.slots)
			data := b.TempDir()
			// Warm up with the measured job itself, twice: plugin pools
			// are per job (a job of other tasks warms nothing measured,
			// and its pools' close 30 s later would land in the timed
			// runs).
			spec := echoSpec(b, echo, c.tasks, 0)
			if c.off {
				spec = batchOff(b, spec)
			}
			submit(b, bin, spec, addrs, data)
			submit(b, bin, spec, addrs, data)
			var all []time.Duration
			var spans float64
			b.ResetTimer()
			for b.Loop() {
				rep, _ := submit(b, bin, spec, addrs, data)
				lat, first, last := latencies(rep)
				all = append(all, lat...)
				spans += last.Sub(first).Seconds()
			}
			reportLatency(b, all)
			b.ReportMetric(spans/float64(b.N)*1000, "span-ms")
		})
	}
}

// BenchmarkTinyTaskThroughput: Preon 4.2's setup, 2048 echo tasks on 16
// peers x 32 slots. tasks/s is over the span from the first lease to the
// last result; wall-tasks/s over the whole `p2pc run`. Target (issue 16):
// >= 20,000 tasks/s. P2PC_BENCH_TASKS sets another task count (e.g.
// 65536: the per-job costs spread thinner, so the CPU per task is
// nearer the marginal cost of a task).
func BenchmarkTinyTaskThroughput(b *testing.B) {
	const peers, slots = 16, 32
	tasks := 2048
	if v := os.Getenv("P2PC_BENCH_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("P2PC_BENCH_TASKS=%q: want a positive count", v)
		}
		tasks = n
	}
	heavy(b)
	bin, echo := binaries(b)
	addrs := swarm(b, bin, peers, slots)
	data := b.TempDir()
	// Warm up with the measured job itself, twice (see above).
	spec := echoSpec(b, echo, tasks, 0)
	submit(b, bin, spec, addrs, data)
	submit(b, bin, spec, addrs, data)
	var span, wall, coord, peer, plugin time.Duration
	var peerCS, pluginCS int64
	starts := 0
	b.ResetTimer()
	for b.Loop() {
		p0, c0, k0 := treeStat(peerPIDs)
		pcs0, ccs0 := ctxSwitches(peerPIDs), ctxSwitches(keys(k0))
		rep, w := submit(b, bin, spec, addrs, data)
		p1, c1, k1 := treeStat(peerPIDs)
		// Context switches: of the children alive before and after.
		peerCS += ctxSwitches(peerPIDs) - pcs0
		pluginCS += ctxSwitches(keys(k1)) - ccs0
		for k := range k1 {
			if !k0[k] {
				starts++
			}
		}
		_, first, last := latencies(rep)
		span += last.Sub(first)
		wall += w
		coord += lastCPU
		peer += p1 - p0
		plugin += c1 - c0
	}
	n := float64(tasks * b.N)
	b.ReportMetric(n/span.Seconds(), "tasks/s")
	b.ReportMetric(n/wall.Seconds(), "wall-tasks/s")
	// CPU per task by process class: steadier than rates on a shared
	// machine (the peers' figure includes their idle gossip during the run).
	b.ReportMetric(float64(coord.Microseconds())/n, "coord-cpu-us/task")
	b.ReportMetric(float64(peer.Microseconds())/n, "peer-cpu-us/task")
	b.ReportMetric(float64(plugin.Microseconds())/n, "plugin-cpu-us/task")
	// Plugin processes the peers started during the measured runs and
	// still alive after them (the warm-ups ran the same job: a warm peer
	// should start none; each start costs milliseconds of CPU on the
	// machine the run shares).
	b.ReportMetric(float64(starts)/float64(b.N), "plugin-starts/run")
	// Context switches per task (all threads): the wake-ups issue 16's
	// per-task CPU is mostly made of.
	b.ReportMetric(float64(peerCS)/n, "peer-cs/task")
	b.ReportMetric(float64(pluginCS)/n, "plugin-cs/task")
}
