// Package verify measures what answer verification costs on an honest
// swarm: the same Mandelbrot job with no verification, with replicas 2 /
// quorum 2, and with adaptive trust, on the same peers in one run.
//
//	go test ./benchmarks/verify -run '^$' -bench . -benchtime 1x -timeout 30m
//
// It starts real `p2pc join` peers on loopback (--no-mdns) and writes
// results/verify/summary.md and results.json.
package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

const spec = `
name: verify-bench
plugin: %s/plugins/mandelbrot
params: {width: 2048, height: 4096, max_iter: 3000, bands: %d}
tasks:
  - range: {param: band, from: 0, to: %d}
reduce: true
%s
`

type row struct {
	Mode     string  `json:"mode"`
	Seconds  float64 `json:"seconds"`
	Attempts int     `json:"attempts"`
	Ratio    float64 `json:"ratio_to_unverified"`
	Work     float64 `json:"work_ratio"`
}

func BenchmarkVerifyOverhead(b *testing.B) {
	root, err := harness.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "p2pc")
	ctx := context.Background()
	if err := harness.Build(ctx, root, bin, false); err != nil {
		b.Fatal(err)
	}
	// One swarm for the benchmark's processes, as a user's machines.
	if _, err := harness.UseTestSwarm(dir); err != nil {
		b.Fatal(err)
	}
	const peers, tasks = 4, 1024
	var addrs []string
	for i := range peers {
		p, err := harness.Start(bin, []string{"--data", filepath.Join(dir, fmt.Sprint("p", i)), "join", "--listen", fmt.Sprintf("127.0.0.%d:0", i+2), "--no-mdns", "--slots", "1", "--name", fmt.Sprint("p", i)}, harness.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Stop(5 * time.Second)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		m, err := p.WaitOutput(wctx, regexp.MustCompile(`listening (\S+)`))
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		addrs = append(addrs, m[1])
	}
	modes := []struct{ name, verify string }{
		{"unverified", ""},
		{"replicas 2 / quorum 2", "verify: {replicas: 2, quorum: 2}"},
		{"adaptive trust, first job (peers earn trust)", "verify: {replicas: 2, quorum: 2, trust: adaptive}"},
		{"adaptive trust, next job (peers already trusted)", "verify: {replicas: 2, quorum: 2, trust: adaptive}"},
		{"unverified again (noise check)", ""},
	}
	var rows []row
	for i, m := range modes {
		path := filepath.Join(dir, fmt.Sprintf("job%d.yaml", i))
		os.WriteFile(path, []byte(fmt.Sprintf(spec, root, tasks, tasks-1, m.verify)), 0o644)
		out := filepath.Join(dir, fmt.Sprintf("out%d", i))
		start := time.Now()
		run, err := harness.Start(bin, []string{"--data", filepath.Join(dir, "sub"), "run", path, "--out", out, "--no-mdns", "--local-slots", "0", "--join", strings.Join(addrs, ",")}, harness.Options{})
		if err != nil {
			b.Fatal(err)
		}
		code, err := run.Wait(20 * time.Minute)
		if err != nil || code != 0 {
			b.Fatalf("%s: exit %d, %v\n%s", m.name, code, err, run.Stderr())
		}
		secs := time.Since(start).Seconds()
		rep, err := report.Read(out)
		if err != nil {
			b.Fatal(err)
		}
		attempts := 0
		for _, t := range rep.Tasks {
			attempts += len(t.Attempts)
		}
		rows = append(rows, row{Mode: m.name, Seconds: secs, Attempts: attempts, Ratio: secs / rows0(rows, secs), Work: float64(attempts) / float64(tasks)})
	}
	b.ReportMetric(rows[1].Ratio, "x-replicas2")
	b.ReportMetric(rows[2].Ratio, "x-adaptive-first")
	b.ReportMetric(rows[3].Ratio, "x-adaptive-trusted")
	writeResults(b, root, rows, peers, tasks)
}

func rows0(rows []row, self float64) float64 {
	if len(rows) == 0 {
		return self
	}
	return rows[0].Seconds
}

func writeResults(b *testing.B, root string, rows []row, peers, tasks int) {
	out := filepath.Join(root, "results", "verify")
	os.MkdirAll(out, 0o755)
	data, _ := json.MarshalIndent(map[string]any{"peers": peers, "slots_per_peer": 1, "tasks": tasks, "date": time.Now().UTC(), "rows": rows}, "", "  ")
	os.WriteFile(filepath.Join(out, "results.json"), append(data, '\n'), 0o644)
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Verification overhead on an honest swarm\n\n")
	fmt.Fprintf(&sb, "Mandelbrot 2048x4096, max_iter 3000, %d tasks, %d peers x 1 slot on loopback (one 2-core machine), same run.\n", tasks, peers)
	fmt.Fprintf(&sb, "Command: `go test ./benchmarks/verify -run '^$' -bench . -benchtime 1x -timeout 30m`\n\n")
	fmt.Fprintf(&sb, "| mode | time (s) | time vs unverified | attempts run | work vs unverified |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&sb, "| %s | %.2f | %.2fx | %d | %.3fx |\n", r.Mode, r.Seconds, r.Ratio, r.Attempts, r.Work)
	}
	fmt.Fprintf(&sb, "\nThe machine is shared and noisy: the two unverified runs bracket the others and show the noise. The work column (task attempts run) does not depend on it.\n")
	fmt.Fprintf(&sb, "\nAdaptive trust replicates every task until a peer has 10 valid results in a row, then with probability 1/streak (BOINC's adaptive replication); the submitter keeps the streaks in its data folder (trust.json), so a later job starts from the trust peers earned; the first job pays for earning it.\n")
	os.WriteFile(filepath.Join(out, "summary.md"), []byte(sb.String()), 0o644)
	b.Logf("\n%s", sb.String())
}
