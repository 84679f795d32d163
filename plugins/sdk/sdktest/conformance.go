package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// Case is one set of params and inputs for Conformance.
type Case struct {
	Name   string
	Params any
	Inputs []sdk.File
}

// CancelTimeout is how long Conformance waits for a task to return after
// its context was cancelled.
const CancelTimeout = 5 * time.Second

// cancelTimeout and cancelAfter are variables so that this package's
// tests can shorten them.
var (
	cancelTimeout = CancelTimeout
	// cancelAfter is how long the task runs before its context is
	// cancelled: long enough to be inside its work, short enough to catch
	// a long task.
	cancelAfter = 50 * time.Millisecond
)

// Conformance checks that task behaves as p2pc expects of every plugin,
// once per case in a subtest (with no cases, once with params {}):
//
//   - it runs without error, twice, each time in a fresh work dir;
//   - every output file it lists is a local path naming a regular file
//     (not a symlink) inside the work dir, reached without leaving it, and
//     no name is listed twice (or collides with the inline data's name,
//     sdk.DataFile), as the host requires;
//   - both runs produce the same Data, the same file list and
//     byte-identical files (redundant replicas are compared by digest);
//   - every progress fraction is within [0, 1] and none is below the one
//     before;
//   - if the task is an sdk.Verifier, its Verify accepts both outputs;
//   - with its context cancelled shortly after the start, it returns (a
//     result or an error) within CancelTimeout.
//
// Call it from a test of the plugin's package; the task runs in-process.
func Conformance(t *testing.T, task sdk.Task, cases ...Case) {
	t.Helper()
	if len(cases) == 0 {
		cases = []Case{{Name: "default"}}
	}
	for i, c := range cases {
		name := c.Name
		if name == "" {
			name = fmt.Sprintf("case%d", i)
		}
		t.Run(name, func(t *testing.T) { checkCase(t, task, c) })
	}
}

// checkCase runs every check of Conformance for one case. It takes a
// testing.TB so that this package's tests can watch it fail.
func checkCase(t testing.TB, task sdk.Task, c Case) {
	t.Helper()
	params, err := Params(c.Params)
	if err != nil {
		t.Fatalf("params: %v", err)
	}
	var runs [2]*Outcome
	for i := range runs {
		req := &sdk.Request{JobID: "sdktest", TaskID: "conformance", Params: params, Inputs: c.Inputs, WorkDir: t.TempDir()}
		out, err := RunRequest(context.Background(), task, req)
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		t.Cleanup(func() { out.Cleanup() })
		checkProgress(t, i+1, out.Progress)
		if v, ok := task.(sdk.Verifier); ok {
			if err := Verify(context.Background(), v, out, c.Inputs...); err != nil {
				t.Errorf("run %d: Verify rejects the task's own output: %v", i+1, err)
			}
		}
		runs[i] = out
	}
	checkSame(t, runs[0], runs[1])
	checkCancel(t, task, params, c.Inputs)
}

func checkProgress(t testing.TB, run int, progress []float64) {
	t.Helper()
	last := 0.0
	for i, f := range progress {
		switch {
		case math.IsNaN(f) || f < 0 || f > 1:
			t.Errorf("run %d: progress #%d is %v, outside [0, 1]", run, i+1, f)
		case f < last:
			t.Errorf("run %d: progress #%d is %v, below the %v reported before it", run, i+1, f, last)
		default:
			last = f
		}
	}
}

// checkSame reports every difference between the outputs of two runs.
func checkSame(t testing.TB, a, b *Outcome) {
	t.Helper()
	if !slices.Equal(a.Result.Files, b.Result.Files) {
		t.Errorf("not deterministic: run 1 lists files %q, run 2 lists %q", a.Result.Files, b.Result.Files)
	}
	names := make([]string, 0, len(a.Files))
	for name := range a.Files {
		names = append(names, name)
	}
	for name := range b.Files {
		if _, ok := a.Files[name]; !ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		x, okx := a.Files[name]
		y, oky := b.Files[name]
		switch {
		case !okx || !oky:
			t.Errorf("not deterministic: output %q exists in only one of two runs", name)
		case !bytes.Equal(x, y):
			t.Errorf("not deterministic: output %q differs between two runs: %s", name, diff(x, y))
		}
	}
}

// diff describes where two byte slices first differ.
func diff(x, y []byte) string {
	n := min(len(x), len(y))
	i := 0
	for i < n && x[i] == y[i] {
		i++
	}
	s := fmt.Sprintf("%d vs %d bytes, first difference at offset %d", len(x), len(y), i)
	if i < n {
		s += fmt.Sprintf(" (%s vs %s)", excerpt(x[i:]), excerpt(y[i:]))
	}
	return s
}

func excerpt(b []byte) string {
	if len(b) > 16 {
		b = b[:16]
	}
	return fmt.Sprintf("%q", b)
}

// checkCancel runs the task with a context that is cancelled shortly
// after the start and fails if it has not returned CancelTimeout later.
// A task that hangs is left running; its work dir is removed when (if)
// it returns.
func checkCancel(t testing.TB, task sdk.Task, params json.RawMessage, inputs []sdk.File) {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdktest-cancel-")
	if err != nil {
		t.Fatalf("make temp dir: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer os.RemoveAll(dir)
		req := &sdk.Request{JobID: "sdktest", TaskID: "cancel", Params: params, Inputs: inputs, WorkDir: dir}
		if out, _ := RunRequest(ctx, task, req); out != nil {
			out.Cleanup()
		}
	}()
	timer := time.NewTimer(cancelAfter)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		cancel()
		select {
		case <-done:
		case <-time.After(cancelTimeout):
			t.Errorf("task did not return within %v after its context was cancelled", cancelTimeout)
		}
	}
}
