package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/p2pc/p2pc/internal/transfer
cpu: AMD EPYC
BenchmarkBulkPath/link=lo/path=bulk-2         	       5	 109780436 ns/op	 305.65 MB/s	   2641844 cpu-ns/MiB
BenchmarkBulkPath/link=lo/path=bulk-2         	       5	 120713116 ns/op	 277.97 MB/s	   2387556 cpu-ns/MiB
BenchmarkBulkPath/link=lo/path=bulk-2         	       5	 100000000 ns/op	 290.00 MB/s	   2500000 cpu-ns/MiB
BenchmarkBulkPath/link=lo/path=grpc-2         	       5	 166346755 ns/op	 201.71 MB/s	   2699056 cpu-ns/MiB
BenchmarkBulkPath/link=lo/path=grpc-2         	       5	 109794092 ns/op	 305.61 MB/s	   2637600 cpu-ns/MiB
BenchmarkPlain 	 20000	 1360 ns/op	 0 B/op	 0 allocs/op
PASS
ok  	github.com/p2pc/p2pc/internal/transfer	12.409s
`

// TestParse: the values of each sub-benchmark by unit, the medians (odd
// and even counts) and the ratios, lower or higher being better.
func TestParse(t *testing.T) {
	res, cpu := parse(sample)
	if cpu != "AMD EPYC" {
		t.Errorf("cpu %q", cpu)
	}
	if got := res["link=lo/path=bulk"]["MB/s"]; len(got) != 3 || got[1] != 277.97 {
		t.Errorf("bulk MB/s %v", got)
	}
	if m, _ := res.median("link=lo/path=bulk", "cpu-ns/MiB"); m != 2500000 {
		t.Errorf("median of three %v", m)
	}
	if m, _ := res.median("link=lo/path=grpc", "ns/op"); m != (166346755+109794092)/2.0 {
		t.Errorf("median of two %v", m)
	}
	if m, ok := res.median("", "allocs/op"); !ok || m != 0 {
		t.Errorf("a benchmark without sub-benchmarks: %v %v", m, ok)
	}
	// MB/s: higher is better, so tuned/plain.
	if _, _, r, _ := res.ratio("link=lo/path=bulk", "link=lo/path=grpc", "MB/s"); r < 1.14 || r > 1.15 {
		t.Errorf("MB/s ratio %v, want 290/253.66", r)
	}
	// cpu-ns/MiB: lower is better, so plain/tuned.
	if _, _, r, _ := res.ratio("link=lo/path=bulk", "link=lo/path=grpc", "cpu-ns/MiB"); r < 1.06 || r > 1.07 {
		t.Errorf("cpu ratio %v, want 2668328/2500000", r)
	}
	if _, _, _, ok := res.ratio("link=lo/path=bulk", "nothing", "ns/op"); ok {
		t.Error("a ratio with a missing side")
	}
}

// TestVerdict: below the margin fails, at or above passes, no figures or
// a benchmark that did not run fail.
func TestVerdict(t *testing.T) {
	res, _ := parse(sample)
	g := guard{tuned: "link=lo/path=bulk", plain: "link=lo/path=grpc", metric: "cpu-ns/MiB"}
	for _, c := range []struct {
		margin float64
		res    results
		pass   bool
		says   string
	}{
		{1.05, res, true, "ok: 1.07x"},
		{1.10, res, false, "FAIL: 1.07x in cpu-ns/MiB, below the margin 1.10x"},
		{1.0, results{}, false, "no cpu-ns/MiB figures"},
	} {
		g.margin = c.margin
		v := measured{g: g, res: c.res}.verdict()
		if v.pass != c.pass || !strings.Contains(v.text, c.says) {
			t.Errorf("margin %v: %+v, want pass %v saying %q", c.margin, v, c.pass, c.says)
		}
	}
}

// TestParseRuns: bulkcpu.sh's lines become figures by path.
func TestParseRuns(t *testing.T) {
	res := parseRuns(`cap 1gbit, 256 MiB, load 10.95 10.16 7.02
run 1 bulk 2.25 s  113.8 MiB/s  client 0.66 s  server 0.26 s  CPU 3.68 s/GiB
run 1 grpc 2.25 s  113.8 MiB/s  client 0.79 s  server 0.29 s  CPU 4.32 s/GiB
run 2 bulk 2.27 s  112.8 MiB/s  client 0.64 s  server 0.25 s  CPU 3.56 s/GiB
run 2 grpc 2.24 s  114.3 MiB/s  client 0.80 s  server 0.33 s  CPU 4.52 s/GiB
run 3 bulk 2.27 s  112.8 MiB/s  client 0.65 s  server 0.29 s  CPU 3.76 s/GiB
load after: 10.64 10.12 7.11
`)
	if got := res["path=bulk"]["cpu-s/GiB"]; len(got) != 3 || got[2] != 3.76 {
		t.Errorf("bulk cpu-s/GiB %v", got)
	}
	if got := res["path=grpc"]["client-cpu-s"]; len(got) != 2 || got[1] != 0.80 {
		t.Errorf("grpc client CPU %v", got)
	}
	if _, _, r, _ := res.ratio("path=bulk", "path=grpc", "cpu-s/GiB"); r < 1.20 || r > 1.21 {
		t.Errorf("ratio %v, want 4.42/3.68", r)
	}
}

// TestVerdictNoGateOrSkipped: a guard without a margin and a script that
// could not run pass, saying so.
func TestVerdictNoGateOrSkipped(t *testing.T) {
	res, _ := parse(sample)
	g := guard{tuned: "link=lo/path=bulk", plain: "link=lo/path=grpc", metric: "cpu-ns/MiB", margin: 10, noGate: true}
	if v := (measured{g: g, res: res}).verdict(); !v.pass || !strings.Contains(v.text, "no margin") {
		t.Errorf("no gate: %+v", v)
	}
	g.noGate = false
	if v := (measured{g: g, res: res}).verdict(); v.pass {
		t.Errorf("gated below the margin: %+v", v)
	}
	if v := (measured{g: g, skipped: "needs root"}).verdict(); !v.pass || !strings.Contains(v.text, "needs root") {
		t.Errorf("skipped: %+v", v)
	}
}
