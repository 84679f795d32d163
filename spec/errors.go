package spec

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxErrors is the largest number of problems Parse reports for one spec.
// When there are more, the list ends with a "too many errors" entry.
const MaxErrors = 20

// Error is one problem in a spec, with its position.
//
// Line and Col are 1-based. Col is 0 when the column is unknown (YAML
// syntax errors only carry a line), and Line is 0 for problems with the
// file as a whole (it is larger than MaxSize); Error leaves unknown parts out.
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

// Error returns "file:line:col: msg".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		if b.Len() > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strconv.Itoa(e.Line))
		if e.Col > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Col))
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is the error Parse and ParseFile return for an invalid spec:
// every problem found (at most MaxErrors, plus a final "too many errors"),
// sorted by position. It is never empty when returned as an error.
//
// Use errors.As with a *ErrorList or **Error target to inspect it; the
// latter finds the first problem.
type ErrorList []*Error

// Error returns the problems one per line.
func (l ErrorList) Error() string {
	switch len(l) {
	case 0:
		return "no errors"
	case 1:
		return l[0].Error()
	}
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap gives errors.Is and errors.As access to each *Error.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// errorSink collects errors during one parse.
type errorSink struct {
	file string
	errs ErrorList
	seen map[Error]bool // the same problem can be reached twice through an alias
	full bool           // MaxErrors reached: further work is pointless
	adds int            // calls to add, counting duplicates: "did this step fail?"
}

func (s *errorSink) add(line, col int, format string, args ...any) {
	s.adds++
	if s.full {
		return
	}
	e := Error{File: s.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
	if s.seen == nil {
		s.seen = make(map[Error]bool)
	}
	if s.seen[e] {
		return
	}
	s.seen[e] = true
	if len(s.errs) == MaxErrors {
		e.Msg = "too many errors"
		s.full = true
	}
	s.errs = append(s.errs, &e)
}

// err returns the sorted list, or nil when there is nothing to report.
func (s *errorSink) err() error {
	if len(s.errs) == 0 {
		return nil
	}
	// The "too many errors" entry stays last whatever its position.
	body := s.errs
	if s.full {
		body = body[:len(body)-1]
	}
	slices.SortStableFunc(body, func(a, b *Error) int {
		if c := cmp.Compare(a.Line, b.Line); c != 0 {
			return c
		}
		return cmp.Compare(a.Col, b.Col)
	})
	return s.errs
}
