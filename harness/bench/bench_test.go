package bench

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

func TestFenech(t *testing.T) {
	// Two machines of rates 2 and 1 that together do 2.85: S_H = 1.425,
	// S_H,max = 1.5, efficiency 95%.
	s := Fenech([]float64{1, 2}, 2.85)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"R_M1", s.RM1, 2}, {"sum", s.SumRM, 3}, {"S_H", s.SH, 1.425}, {"S_H,max", s.SHMax, 1.5}, {"efficiency", s.Efficiency, 0.95}} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if z := Fenech(nil, 1); z.Efficiency != 0 || z.SH != 0 {
		t.Errorf("no solo rates: %+v", z)
	}
}

func TestSummarise(t *testing.T) {
	s := Summarise([]float64{5, 1, 4, 2, 3})
	if s.N != 5 || s.Mean != 3 || s.Min != 1 || s.Max != 5 || s.P50 != 3 {
		t.Errorf("%+v", s)
	}
	if math.Abs(s.SD-math.Sqrt(2.5)) > 1e-12 {
		t.Errorf("sd %v", s.SD)
	}
	if q := Quantile([]float64{0, 10}, 0.99); math.Abs(q-9.9) > 1e-12 {
		t.Errorf("p99 of [0 10] = %v", q)
	}
	if r := Rolling([]float64{2, 4, 6, 8}, 2); r[0] != 2 || r[1] != 3 || r[3] != 7 {
		t.Errorf("rolling %v", r)
	}
	if r := Rolling([]float64{2, math.NaN(), 6, 8, 10}, 2); r[0] != 2 || !math.IsNaN(r[1]) || r[2] != 6 || r[3] != 7 || r[4] != 9 {
		t.Errorf("rolling across a gap %v", r)
	}
}

func TestParseConfig(t *testing.T) {
	good := `
setups:
  2: [0.9, 0.6]
  4: [0.6, 0.5, 0.4, 0.3]
suites:
  mandelbrot:
    full: {width: 100, tasks: 10}
    quick: {tasks: 2}
`
	c, err := ParseConfig([]byte(good), 2)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := c.SelectSetups([]int{4, 2})
	if err != nil || len(ss) != 2 || ss[0].Name != 4 || math.Abs(ss[0].Total()-1.8) > 1e-9 {
		t.Fatalf("%v %v", ss, err)
	}
	if _, err := c.SelectSetups([]int{3}); err == nil {
		t.Error("setup 3 does not exist")
	}
	var m mandelbrotConfig
	m.Height = 7
	if err := c.Decode("mandelbrot", true, &m); err != nil {
		t.Fatal(err)
	}
	if m.Width != 100 || m.Tasks != 2 || m.Height != 7 {
		t.Errorf("quick over full over defaults: %+v", m)
	}
	if err := c.Decode("mandelbrot", false, &struct{ Width int }{}); err == nil {
		t.Error("unknown key tasks accepted")
	}

	for _, bad := range []struct{ yaml, want string }{
		{"setups:\n  2: [1.5, 0.6]\n", "add up to 2.10 cores"},
		{"setups:\n  2: [0.05]\n", "between 0.1"},
		{"setups: {}\n", "no setups"},
		{"setups:\n  2: [0.5]\nmood: happy\n", "mood"},
		{"setups:\n  2: [0.5]\nmode: wifi\n", "bridge or loopback"},
	} {
		if _, err := ParseConfig([]byte(bad.yaml), 2); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want %q", bad.yaml, err, bad.want)
		}
	}
}

// TestRepoConfig checks benchmarks/bench.yaml against a 2-core machine,
// the smallest it is written for.
func TestRepoConfig(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(filepath.Join(root, DefaultConfig), 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Suites() {
		name := s.Info().Name
		if _, ok := c.Suites[name]; !ok && name != "ga" {
			t.Errorf("bench.yaml has no section for suite %s", name)
		}
	}
	for _, quick := range []bool{false, true} {
		for name, into := range map[string]any{"mandelbrot": &mandelbrotConfig{}, "tracker": &trackerConfig{}, "latency": &latencyConfig{}, "transfer": &transferConfig{}, "chaos": &chaosConfig{}, "takeover": &takeoverConfig{}} {
			if err := c.Decode(name, quick, into); err != nil {
				t.Errorf("%s quick=%v: %v", name, quick, err)
			}
		}
	}
}

func TestSelect(t *testing.T) {
	all, err := Select([]string{"all"})
	if err != nil || len(all) < 4 {
		t.Fatalf("%d suites, %v", len(all), err)
	}
	got, err := Select([]string{"latency", "mandelbrot", "latency"})
	if err != nil || len(got) != 2 || got[0].Info().Name != "mandelbrot" {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := Select([]string{"nope"}); err == nil {
		t.Error("unknown suite accepted")
	}
	// chaos is not a paper's experiment: "all" leaves it out, naming it
	// selects it.
	for _, s := range all {
		if s.Info().Name == "chaos" {
			t.Error(`"all" selects the chaos suite`)
		}
	}
	if got, err := Select([]string{"all", "chaos"}); err != nil || len(got) != len(all)+1 {
		t.Errorf("all,chaos: %d suites, %v; all has %d", len(got), err, len(all))
	}
	if got, err := Select([]string{"chaos"}); err != nil || len(got) != 1 || got[0].Info().Name != "chaos" {
		t.Errorf("chaos: %v %v", got, err)
	}
}

// wellFormed fails unless s parses as XML.
func wellFormed(t *testing.T, s string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed: %v\n%s", err, s)
		}
	}
}

func TestSVG(t *testing.T) {
	p := &Plot{Title: "a <b> & c", XLabel: "x", YLabel: "y",
		Series: []Series{{Name: "s", X: []float64{0, 1, 2}, Y: []float64{1, math.NaN(), 3}, Kind: LinePoints}},
		HLines: []HLine{{Y: 2, Label: "ref", Dashed: true}}, YZero: true, Note: "note"}
	wellFormed(t, p.SVG())
	b := &Bars{Title: "bars", YLabel: "%", Categories: []string{"a", "b"},
		Groups: []BarGroup{{Name: "g", Values: []float64{1, math.NaN()}}},
		Marks:  []BarGroup{{Name: "m", Values: []float64{math.NaN(), 2}}}}
	wellFormed(t, b.SVG())
	wellFormed(t, (&Plot{}).SVG())
	// Error bars: one per point or bar that has an interval.
	eb := (&Plot{Series: []Series{{X: []float64{8, 32, 96}, Y: []float64{1, 2, 5}, Lo: []float64{0.8, math.NaN(), 4}, Hi: []float64{1.3, math.NaN(), 6.5}, Kind: LinePoints}}}).SVG()
	wellFormed(t, eb)
	if n := strings.Count(eb, `stroke="#222"`); n != 2 {
		t.Errorf("plot: %d error bars, want 2", n)
	}
	eb = (&Bars{Categories: []string{"a", "b"}, YMax: 110,
		Groups: []BarGroup{{Values: []float64{95, 101}, Lo: []float64{92, 99}, Hi: []float64{97, 112}}, {Values: []float64{50, 60}}}}).SVG()
	wellFormed(t, eb)
	if n := strings.Count(eb, `stroke="#222"`); n != 2 {
		t.Errorf("bars: %d error bars, want 2", n)
	}
	if ticks := niceTicks(0, 97, 6); ticks[0] != 0 || ticks[len(ticks)-1] < 97 {
		t.Errorf("ticks %v", ticks)
	}
}

// quickBench runs `p2pc bench --quick --suite SUITE --setups 2 [EXTRA]`
// as root, within timeout, and returns its output folder and what it
// printed. It skips the test where no lab can be made.
func quickBench(t *testing.T, suite string, timeout time.Duration, extra ...string) (out string, printed []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	root, bin := benchBinary(t, ctx)
	out = t.TempDir()
	cmd := exec.CommandContext(ctx, bin, append([]string{"bench", "--quick", "--suite", suite, "--setups", "2", "--out", out}, extra...)...)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("p2pc bench: %v\n%s", err, b)
	}
	return out, b
}

// benchBinary skips the test in -short mode or where no lab can be made,
// else builds p2pc; it returns the repository and the binary.
func benchBinary(t *testing.T, ctx context.Context) (root, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short")
	}
	if err := harness.LabAvailable(); err != nil {
		t.Skipf("no lab here: %v", err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(t.TempDir(), "p2pc")
	if err := harness.Build(ctx, root, bin, false); err != nil {
		t.Fatal(err)
	}
	return root, bin
}

// TestBenchQuickScratch: `p2pc bench --quick` without --out writes a new
// folder under the temporary folder and leaves results/ alone; its summary
// names the run. It runs in a stand-in for the repository (a link to each
// entry of the real one but results/, an empty folder of its own), so that
// even a p2pc that wrote results/ would leave the real one alone.
func TestBenchQuickScratch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root, bin := benchBinary(t, ctx)
	repo := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "results" {
			if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(repo, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Mkdir(filepath.Join(repo, "results"), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "bench", "--quick", "--suite", "latency", "--setups", "2")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("p2pc bench: %v\n%s", err, b)
	}
	if left, _ := os.ReadDir(filepath.Join(repo, "results")); len(left) > 0 {
		t.Errorf("p2pc bench --quick wrote %d entries into the repository's results/", len(left))
	}
	m := regexp.MustCompile(`(?m)^results: (\S+) \(`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("p2pc bench did not print where its results are:\n%s", b)
	}
	out := string(m[1])
	if !strings.HasPrefix(out, tmp+string(filepath.Separator)) {
		t.Fatalf("results in %s, want a new folder under TMPDIR %s", out, tmp)
	}
	sum, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`From run \d{8}T\d{6}Z \(p2pc bench --quick --suite latency --setups 2; commit [^)]*\), this suite started \d{4}-\d\d-\d\d \d\d:\d\d UTC\.\n`).Match(sum) {
		t.Errorf("summary.md does not say which run and when:\n%s", sum)
	}
}

// TestBenchQuick is the CI smoke test: `p2pc bench --quick --suite all`
// on one setup, as root, within the 3 minutes --quick promises; it checks
// the files every suite must write (not the figures: the machine is
// shared).
func TestBenchQuick(t *testing.T) {
	if _, err := exec.LookPath("rsync"); err != nil {
		t.Skip("rsync is not installed (Debian package rsync; .ci/run installs it): the transfer suite's script compares with it")
	}
	start := time.Now()
	out, b := quickBench(t, "all", 3*time.Minute)
	t.Logf("p2pc bench --quick --suite all --setups 2 took %s", time.Since(start).Round(time.Second))
	files := []string{"machine.json", "machine.md", "summary.md", "report.html",
		"mandelbrot/mandelbrot.json", "mandelbrot/mandelbrot.csv", "mandelbrot/time.svg", "mandelbrot/efficiency.svg", "mandelbrot/job.yaml",
		"ga/ga.json", "ga/ga.csv", "ga/speedup.svg", "ga/efficiency.svg", "ga/ga-30.yaml",
		"tracker/tracker.json", "tracker/busy.svg", "tracker/throughput.svg", "tracker/big.yaml", "tracker/coarse.yaml", "tracker/coarse-off.yaml",
		"latency/latency.json", "latency/latency.svg",
		"scale/scale.json", "scale/scale.csv", "scale/membership.svg", "scale/enrol.svg", "scale/throughput.svg", "scale/coordinator.svg"}
	for _, s := range []string{"mandelbrot", "ga", "tracker", "latency", "file-transfer", "scale"} {
		files = append(files, s+"/summary.md", s+"/rows.json")
	}
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(out, f))
		if err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v (size %v)", f, err, fi)
		}
		if strings.HasSuffix(f, ".svg") {
			svg, _ := os.ReadFile(filepath.Join(out, f))
			wellFormed(t, string(svg))
		}
	}
	var res Result
	rb, err := os.ReadFile(filepath.Join(out, "mandelbrot", "rows.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rb, &res); err != nil || !res.Quick || len(res.Rows) == 0 {
		t.Errorf("rows.json: %v %+v", err, res)
	}
	var tr struct {
		Big    *trackerRun   `json:"big"`
		Coarse *coarseResult `json:"coarse"`
	}
	if tb, err := os.ReadFile(filepath.Join(out, "tracker", "tracker.json")); err != nil || json.Unmarshal(tb, &tr) != nil ||
		tr.Big == nil || tr.Big.Tasks != 1024 || tr.Coarse == nil || tr.Coarse.Batched.N != 1 || tr.Coarse.Off.N != 1 {
		t.Errorf("tracker.json: the big run %+v, the coarse check %+v (%v)", tr.Big, tr.Coarse, err)
	}
	md, _ := os.ReadFile(filepath.Join(out, "ga", "summary.md"))
	if !strings.Contains(string(md), "tail bound") {
		t.Errorf("ga's summary.md without the tail bound:\n%s", md)
	}
	sum, _ := os.ReadFile(filepath.Join(out, "summary.md"))
	for _, want := range []string{"95% CI", "whole command", "## scale"} {
		if !strings.Contains(string(sum), want) {
			t.Errorf("summary.md does not say %q", want)
		}
	}
	for _, want := range []string{"efficiency", "time per suite"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("p2pc bench did not print %q:\n%s", want, b)
		}
	}
}

func TestPackCPUs(t *testing.T) {
	for _, c := range []struct {
		caps []float64
		ok   bool
		want []int
	}{
		{[]float64{0.9, 0.6}, true, []int{0, 1}},
		{[]float64{0.8, 0.5, 0.4}, true, []int{0, 1, 1}},
		{[]float64{0.6, 0.5, 0.4, 0.3}, true, []int{0, 1, 1, 0}},
		{[]float64{0.9, 0.9, 0.9}, false, nil},
		{[]float64{1.5}, false, nil},
	} {
		got, ok := PackCPUs(c.caps, 2, 0.95)
		if ok != c.ok || (ok && !slices.Equal(got, c.want)) {
			t.Errorf("PackCPUs(%v) = %v %v, want %v %v", c.caps, got, ok, c.want, c.ok)
		}
	}
}
