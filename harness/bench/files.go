package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// path is a file of the suite's results folder.
func (e *Env) path(name string) string { return filepath.Join(e.OutDir, name) }

// WriteJSON writes v, indented, into the suite's folder.
func (e *Env) WriteJSON(name string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<", not "\u003c"
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.WriteFile(e.path(name), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// WriteCSV writes a header and rows into the suite's folder.
func (e *Env) WriteCSV(name string, header []string, rows [][]string) error {
	f, err := os.Create(e.path(name))
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	w := csv.NewWriter(f)
	_ = w.Write(header)
	_ = w.WriteAll(rows)
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}

// WriteSVG writes an SVG chart into the suite's folder.
func (e *Env) WriteSVG(name, svg string) error {
	if err := e.writeSVG(name, svg); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// Markdown builds a summary.md.
type Markdown struct{ strings.Builder }

// P writes a paragraph.
func (m *Markdown) P(format string, args ...any) {
	fmt.Fprintf(&m.Builder, format, args...)
	m.WriteString("\n\n")
}

// Table writes a table.
func (m *Markdown) Table(header []string, rows [][]string) {
	m.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for range header {
		m.WriteString(" --- |")
	}
	m.WriteString("\n")
	for _, r := range rows {
		m.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	m.WriteString("\n")
}

// WriteMarkdown writes the summary into the suite's folder.
func (e *Env) WriteMarkdown(name string, m *Markdown) error {
	if err := os.WriteFile(e.path(name), []byte(m.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

func f1(x float64) string  { return fmt.Sprintf("%.1f", x) }
func f2(x float64) string  { return fmt.Sprintf("%.2f", x) }
func f3(x float64) string  { return fmt.Sprintf("%.3f", x) }
func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
