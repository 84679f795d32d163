package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
