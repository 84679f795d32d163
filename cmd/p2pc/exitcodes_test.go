package main

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/report"
)

// readmeExitCodes reads the table after "Exit codes:" in README.md: the
// meaning of each code.
func readmeExitCodes(t *testing.T, readme string) map[int]string {
	t.Helper()
	_, table, ok := strings.Cut(readme, "\nExit codes:\n")
	if !ok {
		t.Fatal(`README.md has no "Exit codes:" table`)
	}
	row := regexp.MustCompile(`^\| (\d+) \| (.+) \|$`)
	codes := map[int]string{}
	for i, line := range strings.Split(strings.TrimLeft(table, "\n"), "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i < 2 {
			continue // the header and its rule
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("README.md exit codes: row %q is not | code | meaning |", line)
		}
		code, _ := strconv.Atoi(m[1])
		if _, dup := codes[code]; dup {
			t.Fatalf("README.md exit codes: %d twice", code)
		}
		codes[code] = m[2]
	}
	return codes
}

// exitConstants reads the exit* constants of main.go with their values.
func exitConstants(t *testing.T) map[string]int {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]int{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "exit") {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					t.Fatalf("main.go: %s is not a plain number", name.Name)
				}
				consts[name.Name], _ = strconv.Atoi(lit.Value)
			}
		}
	}
	return consts
}

// TestExitCodesDocumented: README.md's exit-code table lists exactly the
// codes main.go defines; each kind of failure the CLI classifies exits
// with the code whose row describes it; and every exit code the docs'
// prose names is in the table, a full disk's being 4.
func TestExitCodesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	doc := readmeExitCodes(t, readme)
	consts := exitConstants(t)
	var defined, documented []int
	for _, v := range consts {
		defined = append(defined, v)
	}
	for c := range doc {
		documented = append(documented, c)
	}
	slices.Sort(defined)
	slices.Sort(documented)
	if !slices.Equal(defined, documented) {
		t.Fatalf("main.go defines exit codes %v (%v), README.md's table lists %v", defined, consts, documented)
	}

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	live := context.Background()
	enospc := &os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}
	kinds := []struct {
		what string
		err  error
		want string // in the meaning of the code's row
	}{
		{"run: interrupted", classifyJobErr(canceled.Err(), errors.New("x")), "interrupted"},
		{"run: its own disk", classifyJobErr(nil, fmt.Errorf("output folder /o: %w", job.ErrLocalDisk)), "output folder or block store cannot be written"},
		{"run: bad input", classifyJobErr(nil, fmt.Errorf("spec: %w", job.ErrBadInput)), "bad input"},
		{"run: tasks failed", classifyJobErr(nil, fmt.Errorf("1 task: %w", job.ErrTasksFailed)), "tasks (or the reduce step) failed"},
		{"run: stalled", classifyJobErr(nil, job.ErrStalled), "no peer could take the work left"},
		{"run: anything else", classifyJobErr(nil, errors.New("x")), "internal error"},
		{"export: a full disk", exportErr(live, enospc), "output folder or block store cannot be written"},
		{"status: complete", stateExit(report.StateComplete), "`p2pc status`: the job is complete"},
		{"status: failed", stateExit(report.StateFailed), "`p2pc status`: the job failed"},
		{"status: running", stateExit(report.StateRunning), "`p2pc status`: the job has not completed"},
		{"status: interrupted", stateExit(report.StateInterrupted), "`p2pc status`: the job has not completed"},
	}
	for _, k := range kinds {
		code := exitOK
		var ec *exitError
		if errors.As(k.err, &ec) {
			code = ec.code
		} else if k.err != nil {
			t.Errorf("%s: %v carries no exit code", k.what, k.err)
		}
		if !strings.Contains(doc[code], k.want) {
			t.Errorf("%s exits %d, whose row in README.md says %q, not %q", k.what, code, doc[code], k.want)
		}
	}

	// The prose: every code named is in the table; a full disk is 4.
	mention := regexp.MustCompile(`\bexit(?:s|ed)?(?: with)?(?: code)? \(?(\d+)\)?`)
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, para := range strings.Split(string(b), "\n\n") {
			para = strings.Join(strings.Fields(para), " ")
			for _, sentence := range regexp.MustCompile(`[.;] `).Split(para, -1) {
				for _, m := range mention.FindAllStringSubmatch(sentence, -1) {
					code, _ := strconv.Atoi(m[1])
					if _, ok := doc[code]; !ok {
						t.Errorf("%s: %q names exit code %d, which README.md's table lacks", f, sentence, code)
					}
					low := strings.ToLower(sentence)
					if (strings.Contains(low, "full disk") || strings.Contains(low, "disk full")) && code != exitLocalDisk {
						t.Errorf("%s: %q: a full disk exits %d (%s), not %d", f, sentence, exitLocalDisk, doc[exitLocalDisk], code)
					}
				}
			}
		}
	}
}
