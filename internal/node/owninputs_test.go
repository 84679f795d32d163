package node

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// Inputs of a stage's tasks are local slash-separated paths; a hello may
// say that its last inputs are the tasks' own.
func TestCheckHelloInputNames(t *testing.T) {
	for _, c := range []struct {
		names []string
		own   uint32
		ok    bool
	}{
		{[]string{"table.csv"}, 0, true},
		{[]string{"needs/square/0000/sq.txt", "needs/square/0001/sq.txt"}, 2, true},
		{[]string{"../up"}, 0, false},
		{[]string{"needs/../../up"}, 0, false},
		{[]string{"/abs"}, 0, false},
		{[]string{`a\b`}, 0, false},
		{[]string{"."}, 0, false},
		{[]string{"a", "a"}, 0, false},
		{[]string{"a"}, 2, false},
	} {
		h := goodHello()
		for _, n := range c.names {
			h.Inputs = append(h.Inputs, &peerpb.FileRef{Name: n, FileId: make([]byte, 32), Digest: make([]byte, 32)})
		}
		h.OwnInputs = c.own
		if err := checkHello(h); (err == nil) != c.ok {
			t.Errorf("inputs %q, own %d: %v, want ok %v", c.names, c.own, err, c.ok)
		}
	}
}

func TestTaskInputs(t *testing.T) {
	s := &session{log: slog.Default(), inputs: []sdk.File{{Name: "shared"}},
		own: []*ownInput{{file: sdk.File{Name: "o0"}, ready: true}, {file: sdk.File{Name: "o1"}, ready: true}}}
	names := func(fs []sdk.File) (out []string) {
		for _, f := range fs {
			out = append(out, f.Name)
		}
		return out
	}
	for _, c := range []struct {
		idx  []uint32
		want string
	}{
		{nil, "[shared]"},
		{[]uint32{1}, "[shared o1]"},
		{[]uint32{0, 1}, "[shared o0 o1]"},
	} {
		l := &peerpb.Lease{Inputs: c.idx}
		if err := s.fetchOwnOf(&queued{lease: l, ctx: context.Background()}); err != nil {
			t.Errorf("lease inputs %v: %v", c.idx, err)
		}
		if got := names(s.taskInputs(l)); fmt.Sprint(got) != c.want {
			t.Errorf("lease inputs %v: %v, want %s", c.idx, got, c.want)
		}
	}
	// A lease that names an input the hello has not is refused.
	if err := s.fetchOwnOf(&queued{lease: &peerpb.Lease{Inputs: []uint32{0, 7}}, ctx: context.Background()}); err == nil {
		t.Error("a lease naming input 7 of 2 was accepted")
	}
}
