package benchmarks

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/job"
)

// Issue 33's figures: the dispatch overhead of a job with stages whose
// `each` edge streams, against a flat job of the same tasks, and the
// coordinator's memory for a graph of a million tasks.
//
// BenchmarkGraphDispatch runs, in turn (A/B interleaved, so that a
// shared machine's load falls on both alike), a flat job of N echo tasks
// and a graph of two stages of N/2 echo tasks each, the second needing
// the first through an `each` edge, both on 2 local slots. It reports
// each one's wall time per task, their ratio and the coordinator's
// largest resident size. P2PC_BENCH_GRAPH_TASKS sets N (default
// 100,000); 1,000,000 gives the memory figure, P2PC_BENCH_GRAPH_ONLY=1
// runs the graph alone:
//
//	go test ./benchmarks -run '^$' -bench GraphDispatch -benchtime 3x -timeout 60m
//	P2PC_BENCH_GRAPH_TASKS=1000000 P2PC_BENCH_GRAPH_ONLY=1 go test ./benchmarks -run '^$' -bench GraphDispatch -benchtime 1x -timeout 60m
func BenchmarkGraphDispatch(b *testing.B) {
	heavy(b)
	bin, echo := binaries(b)
	n := 100_000
	if s := os.Getenv("P2PC_BENCH_GRAPH_TASKS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 2 || n%2 != 0 {
			b.Fatalf("P2PC_BENCH_GRAPH_TASKS=%q: an even number of tasks, at least 2", s)
		}
	}
	dir := b.TempDir()
	flat := filepath.Join(dir, "flat.yaml")
	graph := filepath.Join(dir, "graph.yaml")
	write := func(path, body string) {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	write(flat, fmt.Sprintf("name: flat\nplugin: %s\ntasks:\n  - range: {param: i, from: 0, to: %d}\n", echo, n-1))
	write(graph, fmt.Sprintf(`name: graph
stages:
  - name: first
    plugin: %[1]s
    tasks:
      - range: {param: i, from: 0, to: %[2]d}
  - name: second
    needs: [{stage: first, edge: each}]
    plugin: %[1]s
    tasks:
      - range: {param: i, from: 0, to: %[2]d}
`, echo, n/2-1))
	data := filepath.Join(dir, "data")
	var flatWall, graphWall time.Duration
	var flatRSS, graphRSS int64
	for i := 0; i < b.N; i++ {
		for _, c := range []struct {
			spec string
			wall *time.Duration
			rss  *int64
		}{{flat, &flatWall, &flatRSS}, {graph, &graphWall, &graphRSS}} {
			if c.spec == flat && os.Getenv("P2PC_BENCH_GRAPH_ONLY") != "" {
				continue
			}
			out := filepath.Join(dir, fmt.Sprintf("out-%d-%s", i, filepath.Base(c.spec)))
			wall, rss := runLocal(b, bin, c.spec, out, data)
			*c.wall += wall
			*c.rss = max(*c.rss, rss)
			os.RemoveAll(out)
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*n) }
	b.ReportMetric(per(graphWall), "graph-µs/task")
	b.ReportMetric(float64(graphRSS)/(1<<20), "graph-maxrss-MiB")
	if flatWall > 0 {
		b.ReportMetric(per(flatWall), "flat-µs/task")
		b.ReportMetric(float64(graphWall)/float64(flatWall), "graph/flat")
		b.ReportMetric(float64(flatRSS)/(1<<20), "flat-maxrss-MiB")
	}
}

// runLocal runs spec on 2 local slots into out and returns the command's
// wall time and largest resident size.
func runLocal(b *testing.B, bin, spec, out, data string) (time.Duration, int64) {
	b.Helper()
	start := time.Now()
	p, err := harness.Start(bin, []string{"--data", data, "run", spec, "--out", out, "--local-slots", "2", "--no-progress", "--no-mdns"}, harness.Options{Name: "p2pc run"})
	if err != nil {
		b.Fatal(err)
	}
	code, err := p.Wait(50 * time.Minute)
	wall := time.Since(start)
	if err != nil || code != 0 {
		b.Fatalf("p2pc run %s: exit %d, %v\n%s", filepath.Base(spec), code, err, p.Stderr())
	}
	if g, ok, err := job.ReadGraphReport(out); err != nil || ok && g.State != "complete" {
		b.Fatalf("graph report: %v, state %v", err, g)
	}
	return wall, p.MaxRSS()
}
