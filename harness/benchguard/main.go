// Command benchguard runs the Go benchmark that justifies each hand-tuned
// mechanism against its plain alternative and fails when a mechanism wins
// by less than its stated margin (`just bench-guard`):
//
//	go run ./harness/benchguard [-count N] [-out results/bench-guard.md]
//
// Each guard is a benchmark with two sub-benchmarks, the mechanism and
// the plain way, and a metric (lower is better unless it is a rate). The
// ratio plain/mechanism of the metric's medians over -count runs must be
// at least the margin. The figures, with the load average before and
// after each benchmark, go into the -out file (written whole, through a
// temporary file); the exit status is 1 if a guard failed or did not
// run. It imports only the standard library.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// guard is one mechanism's benchmark and margin.
type guard struct {
	mechanism string // what is hand-tuned, and where
	pkg       string // the package holding the benchmark
	bench     string // the benchmark (a -bench pattern matching it alone)
	benchtime string
	// script, if set, measures instead of a Go benchmark: run with
	// RUNS=count, it prints runLine lines (needs root: see needsRoot).
	script string
	tuned  string // the mechanism's sub-benchmark (the name after bench/)
	plain  string // the plain alternative's
	metric string // the unit compared: ns/op, MB/s, cpu-ns/MiB, ...
	margin float64
	// noGate: the figures are reported, no margin applies.
	noGate bool
	// info rows are reported beside the gated one.
	info []pair
	why  string // what the margin stands for
}

// pair is an informative comparison beside the gated one.
type pair struct{ tuned, plain, metric string }

var guards = []guard{
	{
		mechanism: "bulk block path (internal/transfer/bulk.go), real processes",
		script:    "benchmarks/transfer/bulkcpu.sh",
		tuned:     "path=bulk", plain: "path=grpc", metric: "cpu-s/GiB", margin: 1.10,
		info: []pair{{"path=bulk", "path=grpc", "MiB/s"}},
		why:  "over a link slower than the CPU (a veth pair capped at 1 Gbit/s with tc, 256 MiB from `blocks serve` to `blocks get -o`) both paths fill the link; the bulk path must still cost at least 10% less CPU per GiB (client and server; 1.16x-1.26x measured at load 6-13), or it wins only on loopback. Needs root (network namespaces, tc); skipped otherwise, the in-process row below then the only figures",
	},
	{
		mechanism: "bulk block path (internal/transfer/bulk.go), in process",
		pkg:       "./internal/transfer", bench: "BenchmarkBulkPath", benchtime: "5x",
		tuned: "link=1gbit/path=bulk", plain: "link=1gbit/path=grpc", metric: "cpu-ns/MiB", noGate: true,
		info: []pair{
			{"link=1gbit/path=bulk", "link=1gbit/path=grpc", "MB/s"},
			{"link=lo/path=bulk", "link=lo/path=grpc", "MB/s"},
			{"link=lo/path=bulk", "link=lo/path=grpc", "cpu-ns/MiB"},
		},
		why: "with client and server in one process (the link emulated: the server's writes share a budget of 119 MiB/s) the saving shows smaller and noisier than with real processes (1.03x-1.19x at load 6-13); reported for machines without root, and for loopback",
	},
	{
		mechanism: "bulk answers' write batching (internal/transfer/batch.go), in process",
		pkg:       "./internal/transfer", bench: "BenchmarkBulkBatch", benchtime: "5x",
		tuned: "batch=on", plain: "batch=off", metric: "cpu-ns/MiB", noGate: true,
		info: []pair{{"batch=on", "batch=off", "MB/s"}},
		why:  "the server's TLS records gathered into writes of about 256 KiB instead of one write per 16 KiB record; with client and server in one process the saving is within the noise (0.97x-1.0x at load 20), between real processes on loopback it is 0.8x of the server's CPU per GiB (benchmarks/transfer/abcpu.sh, results/transfer/history.md); reported, not gated",
	},
	{
		mechanism: "hand-written JSON encoder (internal/report/encode.go, AppendTask)",
		pkg:       "./internal/report", bench: "BenchmarkAppendTask", benchtime: "20000x",
		tuned: "AppendTask", plain: "MarshalIndent", metric: "ns/op", margin: 3.0,
		info: []pair{{"AppendTask", "MarshalIndent", "allocs/op"}},
		why:  "a task's report text at least 3 times as fast as encoding/json's MarshalIndent, byte for byte the same (TestAppendTask)",
	},
	{
		mechanism: "report spool (internal/job/spool.go)",
		pkg:       "./internal/job", bench: "BenchmarkSpool", benchtime: "20x",
		tuned: "from=spool", plain: "from=db", metric: "ns/task", margin: 3.0,
		why: "report.json's task text from memory (encoding paid as records leave memory) at least 3 times as fast as reading every record back from job.db and encoding it",
	},
	{
		mechanism: "journal hold marks (internal/job/run.go, journalPassLocked)",
		pkg:       "./internal/jobdb", bench: "BenchmarkHoldRunning", benchtime: "20000x",
		tuned: "rows=once", plain: "rows=twice", metric: "cpu-ns/op", margin: 1.10,
		info: []pair{{"rows=once", "rows=twice", "ns/op"}},
		why:  "writing a short task's row once (done) instead of twice (running, then done) must save at least 10% of the journal's CPU per task",
	},
}

func main() {
	count := flag.Int("count", 5, "runs of each benchmark (the medians are compared)")
	out := flag.String("out", "results/bench-guard.md", "where the figures go")
	flag.Parse()
	ok, err := run(*count, *out, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-guard:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// measured is one guard's figures.
type measured struct {
	g          guard
	res        results
	loadBefore string
	loadAfter  string
	took       time.Duration
	err        error
	skipped    string // why a script guard did not run
}

func run(count int, out string, log io.Writer) (bool, error) {
	start := time.Now()
	var all []measured
	var cpu string
	for _, g := range guards {
		m := measured{g: g, loadBefore: loadavg()}
		t0 := time.Now()
		fmt.Fprintf(log, "bench-guard: %s (%s %s)\n", g.mechanism, g.pkg, g.bench)
		if g.script != "" {
			if why := needsRoot(); why != "" {
				m.skipped = why
				all = append(all, m)
				continue
			}
			text, err := runScript(g, count)
			m.took, m.loadAfter, m.err = time.Since(t0), loadavg(), err
			if err == nil {
				m.res = parseRuns(text)
			}
			all = append(all, m)
			continue
		}
		text, err := goBench(g, count)
		m.took, m.loadAfter = time.Since(t0), loadavg()
		if err == nil {
			var c string
			m.res, c = parse(text)
			cpu = cmpOr(c, cpu)
		}
		m.err = err
		all = append(all, m)
	}
	ok := true
	for _, m := range all {
		v := m.verdict()
		fmt.Fprintf(log, "bench-guard: %s: %s\n", m.g.mechanism, v.text)
		ok = ok && v.pass
	}
	doc := render(all, cpu, out, count, time.Since(start))
	if err := writeFile(out, doc); err != nil {
		return false, err
	}
	fmt.Fprintf(log, "bench-guard: figures in %s\n", out)
	return ok, nil
}

// goBench runs g's benchmark count times and returns go test's output.
func goBench(g guard, count int) (string, error) {
	pattern := "^" + g.bench + "$"
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", pattern, "-benchtime", g.benchtime,
		"-count", strconv.Itoa(count), "-timeout", "5m", g.pkg)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return b.String(), fmt.Errorf("go test -bench %s %s: %w\n%s", g.bench, g.pkg, err, b.String())
	}
	return b.String(), nil
}

// needsRoot says why bulkcpu.sh cannot run here ("" if it can).
func needsRoot() string {
	if os.Geteuid() != 0 {
		return "needs root (network namespaces, tc)"
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "needs " + tool
		}
	}
	return ""
}

// runScript runs g's script with RUNS=count and returns its output.
func runScript(g guard, count int) (string, error) {
	cmd := exec.Command(g.script)
	cmd.Env = append(os.Environ(), "RUNS="+strconv.Itoa(count))
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return b.String(), fmt.Errorf("%s: %w\n%s", g.script, err, b.String())
	}
	return b.String(), nil
}

// runLine is a line of bulkcpu.sh: run, path, seconds, MiB/s, client and
// server CPU seconds, CPU seconds per GiB.
var runLine = regexp.MustCompile(`^run \d+ (\S+) ([\d.]+) s\s+([\d.]+) MiB/s\s+client ([\d.]+) s\s+server ([\d.]+) s\s+CPU ([\d.]+) s/GiB`)

// parseRuns reads bulkcpu.sh's runs as results: path=MODE -> unit.
func parseRuns(text string) results {
	res := results{}
	for _, line := range strings.Split(text, "\n") {
		m := runLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		sub := "path=" + m[1]
		if res[sub] == nil {
			res[sub] = map[string][]float64{}
		}
		for i, unit := range []string{"s", "MiB/s", "client-cpu-s", "server-cpu-s", "cpu-s/GiB"} {
			v, _ := strconv.ParseFloat(m[i+2], 64)
			res[sub][unit] = append(res[sub][unit], v)
		}
	}
	return res
}

// results are a benchmark's figures: sub-benchmark -> unit -> one value
// per run.
type results map[string]map[string][]float64

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse reads go test -bench output: each result line's sub-benchmark
// name (after the first slash, "" for none) and its value-unit pairs;
// and the cpu: line.
func parse(text string) (results, string) {
	res := results{}
	var cpu string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if c, ok := strings.CutPrefix(line, "cpu: "); ok {
			cpu = c
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		_, sub, _ := strings.Cut(m[1], "/")
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			if res[sub] == nil {
				res[sub] = map[string][]float64{}
			}
			res[sub][f[i+1]] = append(res[sub][f[i+1]], v)
		}
	}
	return res, cpu
}

// median of the values of sub's unit, and whether there are any.
func (r results) median(sub, unit string) (float64, bool) {
	v := slices.Clone(r[sub][unit])
	if len(v) == 0 {
		return 0, false
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2], true
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2, true
}

// higherIsBetter: rates (MB/s, ops/s).
func higherIsBetter(unit string) bool { return strings.HasSuffix(unit, "/s") }

// ratio is how many times better tuned is than plain in unit (>1: the
// mechanism wins).
func (r results) ratio(tuned, plain, unit string) (t, p, ratio float64, ok bool) {
	t, ok1 := r.median(tuned, unit)
	p, ok2 := r.median(plain, unit)
	if !ok1 || !ok2 || t == 0 || p == 0 {
		return t, p, 0, false
	}
	if higherIsBetter(unit) {
		return t, p, t / p, true
	}
	return t, p, p / t, true
}

type verdict struct {
	pass bool
	text string
}

func (m measured) verdict() verdict {
	if m.skipped != "" {
		return verdict{true, "not run: " + m.skipped}
	}
	if m.err != nil {
		return verdict{false, "did not run: " + firstLine(m.err.Error())}
	}
	g := m.g
	_, _, r, ok := m.res.ratio(g.tuned, g.plain, g.metric)
	switch {
	case !ok:
		return verdict{false, fmt.Sprintf("no %s figures for %s and %s", g.metric, g.tuned, g.plain)}
	case g.noGate:
		return verdict{true, fmt.Sprintf("%.2fx in %s (no margin)", r, g.metric)}
	case r < g.margin:
		return verdict{false, fmt.Sprintf("FAIL: %.2fx in %s, below the margin %.2fx", r, g.metric, g.margin)}
	}
	return verdict{true, fmt.Sprintf("ok: %.2fx in %s (margin %.2fx)", r, g.metric, g.margin)}
}

// source names where g's figures come from.
func (g guard) source() string {
	if g.script != "" {
		return "`" + g.script + "`"
	}
	return "`" + g.bench + "`"
}

func render(all []measured, cpu, out string, count int, took time.Duration) string {
	var b strings.Builder
	rev, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if st, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!"+out).Output(); len(st) > 0 {
		rev = append(bytes.TrimSpace(rev), " with uncommitted changes"...)
	}
	goVersion, _ := exec.Command("go", "env", "GOVERSION").Output()
	fmt.Fprintf(&b, "# Bench guard\n\n")
	fmt.Fprintf(&b, "`just bench-guard` (`go run ./harness/benchguard`): each hand-tuned mechanism against its plain\n")
	fmt.Fprintf(&b, "alternative; the ratio (plain / mechanism, or mechanism / plain for rates) of the medians must reach\n")
	fmt.Fprintf(&b, "the margin. Written by the last run: %s, commit %s, %s, %s, %d CPUs (%s), took %s.\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), strings.TrimSpace(string(rev)), strings.TrimSpace(string(goVersion)),
		runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), cmpOr(cpu, "cpu unknown"), took.Round(time.Second))
	fmt.Fprintf(&b, "The load average (1, 5, 15 min) is given before and after each benchmark: a loaded machine\n")
	fmt.Fprintf(&b, "(other processes on the same cores) makes the figures noisy.\n\n")
	fmt.Fprintf(&b, "| mechanism | benchmark | metric | mechanism | plain | ratio | margin | verdict |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, m := range all {
		g := m.g
		t, p, r, _ := m.res.ratio(g.tuned, g.plain, g.metric)
		v := m.verdict()
		word, margin := "ok", fmt.Sprintf("%.2fx", g.margin)
		switch {
		case !v.pass:
			word = "**FAIL**"
		case m.skipped != "":
			word = "not run: " + m.skipped
		case g.noGate:
			word, margin = "reported", "none"
		}
		fmt.Fprintf(&b, "| %s | %s %s vs %s | %s | %s | %s | %.2fx | %s | %s |\n",
			g.mechanism, g.source(), g.tuned, g.plain, g.metric, num(t), num(p), r, margin, word)
	}
	for _, m := range all {
		g := m.g
		fmt.Fprintf(&b, "\n## %s\n\n", g.mechanism)
		if g.script != "" {
			fmt.Fprintf(&b, "`RUNS=%d %s`", count, g.script)
		} else {
			fmt.Fprintf(&b, "`go test -run '^$' -bench '^%s$' -benchtime %s -count %d %s`", g.bench, g.benchtime, count, g.pkg)
		}
		fmt.Fprintf(&b, ", load %s before, %s after, %s.\n", m.loadBefore, m.loadAfter, m.took.Round(time.Second))
		if g.noGate {
			fmt.Fprintf(&b, "No margin: %s.\n\n", g.why)
		} else {
			fmt.Fprintf(&b, "Margin: %s.\n\n", g.why)
		}
		if m.skipped != "" {
			fmt.Fprintf(&b, "Not run: %s.\n", m.skipped)
			continue
		}
		if m.err != nil {
			fmt.Fprintf(&b, "Did not run:\n\n```\n%s\n```\n", strings.TrimSpace(m.err.Error()))
			continue
		}
		fmt.Fprintf(&b, "| comparison | metric | mechanism | plain | ratio |\n| --- | --- | --- | --- | --- |\n")
		for _, c := range append([]pair{{g.tuned, g.plain, g.metric}}, g.info...) {
			t, p, r, _ := m.res.ratio(c.tuned, c.plain, c.metric)
			fmt.Fprintf(&b, "| %s vs %s | %s | %s | %s | %.2fx |\n", c.tuned, c.plain, c.metric, num(t), num(p), r)
		}
		fmt.Fprintf(&b, "\nEvery run (medians above):\n\n")
		subs := make([]string, 0, len(m.res))
		for s := range m.res {
			subs = append(subs, s)
		}
		slices.Sort(subs)
		for _, s := range subs {
			units := make([]string, 0, len(m.res[s]))
			for u := range m.res[s] {
				units = append(units, u)
			}
			slices.Sort(units)
			var parts []string
			for _, u := range units {
				var vs []string
				for _, v := range m.res[s][u] {
					vs = append(vs, num(v))
				}
				parts = append(parts, u+" "+strings.Join(vs, ", "))
			}
			fmt.Fprintf(&b, "- %s: %s\n", cmpOr(s, g.source()), strings.Join(parts, "; "))
		}
	}
	return b.String()
}

// num formats a figure with 3 significant digits or as an integer.
func num(v float64) string {
	if v >= 1000 || v == float64(int64(v)) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// loadavg is the 1, 5 and 15 minute load averages ("?" where unknown).
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// writeFile writes path whole: a temporary file beside it, then a rename.
func writeFile(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".bench-guard-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.WriteString(text)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
