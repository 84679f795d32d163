package bench

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// ReportHTML is the self-contained report of a bench run, written beside
// summary.md: every suite's table, notes and figures (the SVGs inline,
// PNGs as data: URLs), and the machine. It loads nothing from elsewhere,
// so it can be mailed or opened offline.
const ReportHTML = "report.html"

// htmlSuite is one suite as the report shows it.
type htmlSuite struct {
	*Result
	Table   [][]string
	Figures []htmlFigure
	// FromText says which run wrote the suite's rows; Earlier marks a
	// run other than the page's.
	FromText string
	Earlier  bool
}

type htmlFigure struct {
	Name string
	SVG  template.HTML // inline markup, or
	PNG  template.URL  // a data: URL
}

// xmlProlog is an SVG file's XML declaration and doctype, which cannot
// stand inside HTML.
var xmlProlog = regexp.MustCompile(`(?s)^\s*(<\?xml.*?\?>\s*)?(<!DOCTYPE.*?>\s*)?`)

// figuresOf reads the figures of a suite's folder, by name.
func figuresOf(dir string) []htmlFigure {
	var figs []htmlFigure
	entries, _ := os.ReadDir(dir)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		ext := strings.ToLower(filepath.Ext(n))
		if ext != ".svg" && ext != ".png" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil || len(data) > 8<<20 {
			continue
		}
		switch {
		case ext == ".png" && bytes.HasPrefix(data, []byte("\x89PNG")):
			figs = append(figs, htmlFigure{Name: n, PNG: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(data))})
		case ext == ".svg":
			svg := xmlProlog.ReplaceAll(data, nil)
			// Our plots never script; a file that does is not inlined.
			if !bytes.HasPrefix(svg, []byte("<svg")) || bytes.Contains(bytes.ToLower(svg), []byte("<script")) {
				continue
			}
			figs = append(figs, htmlFigure{Name: n, SVG: template.HTML(svg)})
		}
	}
	return figs
}

var reportTmpl = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>p2pc bench report</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; color: #1d2330; margin: 0 auto; max-width: 1100px; padding: 1em 1.5em; }
h1 { font-size: 1.5em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0; } th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; }
th { background: #eef0f3; } .quick, .earlier { color: #b3261e; font-weight: 600; } .from { color: #6b7280; }
figure { margin: 1em 0; } figure svg, figure img { max-width: 100%; height: auto; } figcaption { color: #6b7280; font-size: .9em; }
pre { background: #f4f5f7; padding: .8em; overflow: auto; } nav a { margin-right: 1em; }
</style></head><body>
<h1>p2pc bench report</h1>
<p>Written by <code>p2pc bench</code> run {{.Run}} on {{.When}}; a section from another run says so. The numbers are also in <code>summary.md</code> and each suite's <code>rows.json</code>; this page holds the same tables and the figures, and needs nothing else to show them.</p>
<nav>{{range .Suites}}<a href="#{{.Suite}}">{{.Suite}}</a>{{end}}<a href="#machine">machine</a></nav>
{{range .Suites}}
<h2 id="{{.Suite}}">{{.Suite}}: {{.Title}} <small>({{.Paper}})</small></h2>
<p class="{{if .Earlier}}earlier{{else}}from{{end}}">{{.FromText}}</p>
{{if .Quick}}<p class="quick">--quick run: a smoke check, not a measurement.</p>{{end}}
<table><tr><th>setup</th><th>metric</th><th>ours</th><th>paper</th></tr>
{{range .Table}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{if .Notes}}<ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{range .Figures}}<figure>{{if .SVG}}{{.SVG}}{{else}}<img src="{{.PNG}}" alt="{{.Name}}">{{end}}<figcaption>{{.Name}}</figcaption></figure>
{{end}}{{end}}
<h2 id="machine">Machine</h2>
<pre>{{.Machine}}</pre>
</body></html>
`))

// writeHTML writes ReportHTML into out from the suites' results and the
// figures in their folders (dirs).
func writeHTML(out string, m Machine, results []*Result, dirs map[*Result]string, now time.Time) error {
	data := struct {
		Run     string
		When    string
		Suites  []htmlSuite
		Machine string
	}{Run: m.Run, When: now.UTC().Format("2006-01-02 15:04 MST"), Machine: m.Markdown()}
	for _, r := range results {
		from, earlier := r.From.Describe(m.Run)
		data.Suites = append(data.Suites, htmlSuite{Result: r, Table: rowsOf(r), Figures: figuresOf(dirs[r]), FromText: from, Earlier: earlier})
	}
	var buf bytes.Buffer
	if err := reportTmpl.Execute(&buf, data); err != nil {
		return fmt.Errorf("write %s: %w", ReportHTML, err)
	}
	if err := os.WriteFile(filepath.Join(out, ReportHTML), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", ReportHTML, err)
	}
	return nil
}
