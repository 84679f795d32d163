package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// TestReportHTML rebuilds the top files of a copy of the committed
// results and checks report.html: every suite's table, every SVG inline,
// and nothing loaded from elsewhere.
func TestReportHTML(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(root, "results")
	out := t.TempDir()
	if err := os.CopyFS(out, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	var m Machine
	b, err := os.ReadFile(filepath.Join(out, "machine.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if err := writeTop(out, m); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(out, ReportHTML))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	var svgs []string
	suites := 0
	for _, rows := range mustGlob(t, filepath.Join(out, "*", "rows.json")) {
		var r Result
		b, _ := os.ReadFile(rows)
		if json.Unmarshal(b, &r) != nil {
			continue
		}
		suites++
		svgs = append(svgs, mustGlob(t, filepath.Join(filepath.Dir(rows), "*.svg"))...)
		if !strings.Contains(html, `id="`+r.Suite+`"`) {
			t.Errorf("suite %s missing", r.Suite)
		}
		for _, row := range r.Rows {
			if row.Value != "" && !strings.Contains(html, htmlEscape(row.Value)) {
				t.Errorf("suite %s: value %q missing", r.Suite, row.Value)
			}
		}
	}
	if suites == 0 || len(svgs) == 0 {
		t.Fatalf("nothing to check: %d suites, %d SVGs in the committed results", suites, len(svgs))
	}
	inline := 0
	for _, s := range svgs {
		if strings.HasPrefix(strings.TrimSpace(string(xmlProlog.ReplaceAll(must(os.ReadFile(s)), nil))), "<svg") {
			inline++
		}
	}
	if got := strings.Count(html, "<svg"); got != inline {
		t.Errorf("%d SVGs inline, want %d", got, inline)
	}
	if ext := regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:|//)`).FindString(html); ext != "" || strings.Contains(strings.ToLower(html), "<script") {
		t.Errorf("report.html loads from elsewhere or scripts: %q", ext)
	}
	t.Logf("report.html: %d bytes, %d suites, %d SVGs inline", len(page), suites, inline)
}

func mustGlob(t *testing.T, pattern string) []string {
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// htmlEscape escapes s as html/template does in text.
func htmlEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;", "+", "&#43;")
	return r.Replace(s)
}

// TestRunStamps: summary.md and report.html say which run and date each
// suite's rows come from, and mark the rows of runs other than the one
// that rebuilt them (a run of one suite keeps the others' folders).
func TestRunStamps(t *testing.T) {
	out := t.TempDir()
	old := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)
	now := time.Date(2026, 11, 28, 5, 15, 0, 0, time.UTC)
	for _, r := range []Result{
		{Suite: "mandelbrot", Title: "M", Rows: []Row{{Metric: "m", Value: "1"}},
			From: &RunStamp{Run: "20261120T093000Z", Date: old, Commit: "0123456789abcdef", Command: "p2pc bench --suite all"}},
		{Suite: "latency", Title: "L", Quick: true, Rows: []Row{{Metric: "l", Value: "2"}},
			From: &RunStamp{Run: "20261128T051500Z", Date: now.Add(time.Minute), Commit: "fedcba9876543210", Dirty: true, Command: "p2pc bench --quick --suite latency"}},
		{Suite: "ga", Title: "G", Rows: []Row{{Metric: "g", Value: "3"}}}, // written before runs were stamped
	} {
		dir := filepath.Join(out, r.Suite)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(dir, "rows.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeTop(out, Machine{Date: now, Run: "20261128T051500Z"}); err != nil {
		t.Fatal(err)
	}
	sum := string(must(os.ReadFile(filepath.Join(out, "summary.md"))))
	page := string(must(os.ReadFile(filepath.Join(out, ReportHTML))))
	for _, want := range []string{
		"From run 20261120T093000Z (p2pc bench --suite all; commit 0123456789ab), this suite started 2026-11-20 09:30 UTC. An earlier run than 20261128T051500Z",
		"From run 20261128T051500Z (p2pc bench --quick --suite latency; commit fedcba987654 with uncommitted changes), this suite started 2026-11-28 05:16 UTC.",
		"From an earlier run that did not record itself",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary.md lacks %q:\n%s", want, sum)
		}
		if !strings.Contains(page, htmlEscape(want)) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(sum, "fedcba987654 with uncommitted changes), this suite started 2026-11-28 05:16 UTC. An earlier") {
		t.Errorf("summary.md marks the current run's suite as another run's:\n%s", sum)
	}
	if n := strings.Count(page, `class="earlier"`); n != 2 {
		t.Errorf("report.html marks %d suites as another run's, want 2 (mandelbrot, ga)", n)
	}
	if !strings.Contains(page, "run 20261128T051500Z on 2026-11-28") {
		t.Errorf("report.html does not name its own run")
	}
}
