package sdktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// taskFunc adapts a function to sdk.Task.
type taskFunc func(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error)

func (f taskFunc) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	return f(ctx, req, host)
}

// good is a well-behaved task: it reports progress, honours ctx, writes a
// file and returns its params as data.
var good = taskFunc(func(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	for i := 1; i <= 4; i++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
		host.Progress(ctx, float64(i)/4, fmt.Sprintf("step %d", i))
	}
	host.Partial(ctx, []byte("half"))
	if err := os.MkdirAll(filepath.Join(req.WorkDir, "sub"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(req.WorkDir, "sub", "out.txt"), []byte("hello"), 0o644); err != nil {
		return nil, err
	}
	return &sdk.Result{Data: req.Params, Files: []string{"sub/out.txt"}}, nil
})

// writes returns a task that writes file name with content and lists list.
func writes(name, content string, list ...string) taskFunc {
	return func(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
		if err := os.WriteFile(filepath.Join(req.WorkDir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
		return &sdk.Result{Files: list}, nil
	}
}

func TestRun(t *testing.T) {
	params := []byte(`{ "b": 1,  "a": [2] }`)
	out, err := Run(context.Background(), good, params)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Cleanup()
	if got := string(out.Files[sdk.DataFile]); got != string(params) {
		t.Errorf("data = %q, want the params verbatim %q", got, params)
	}
	if got := string(out.Files["sub/out.txt"]); got != "hello" {
		t.Errorf("file = %q", got)
	}
	if fmt.Sprint(out.Progress) != "[0.25 0.5 0.75 1]" || out.Notes[3] != "step 4" {
		t.Errorf("progress = %v %q", out.Progress, out.Notes)
	}
	if len(out.Partials) != 1 || string(out.Partials[0]) != "half" {
		t.Errorf("partials = %q", out.Partials)
	}
	o := out.Output("t1")
	if o.TaskID != "t1" || string(o.Params) != string(params) || len(o.Files) != 2 {
		t.Fatalf("output = %+v", o)
	}
	for _, f := range o.Files {
		b, err := os.ReadFile(f.Path)
		if err != nil || string(b) != string(out.Files[f.Name]) {
			t.Errorf("output file %s at %s: %q, %v", f.Name, f.Path, b, err)
		}
	}
	if err := out.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out.WorkDir); !os.IsNotExist(err) {
		t.Errorf("work dir still there after Cleanup: %v", err)
	}
}

func TestRunErrors(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	tests := []struct {
		name   string
		task   sdk.Task
		params any
		want   string
	}{
		{"task error", taskFunc(func(context.Context, *sdk.Request, sdk.Host) (*sdk.Result, error) { return nil, boom }), nil, "boom"},
		{"panic", taskFunc(func(context.Context, *sdk.Request, sdk.Host) (*sdk.Result, error) { panic("oops") }), nil, "panic: oops"},
		{"absolute path", writes("a", "x", "/etc/passwd"), nil, "not a local path"},
		{"dot-dot path", writes("a", "x", "../a"), nil, "not a local path"},
		{"missing file", writes("a", "x", "b"), nil, "no such file"},
		{"listed twice", writes("a", "x", "a", "./a"), nil, "listed twice"},
		{"directory", writes("a", "x", "."), nil, "is a directory"},
		{"symlink out", taskFunc(func(_ context.Context, req *sdk.Request, _ sdk.Host) (*sdk.Result, error) {
			return &sdk.Result{Files: []string{"link"}}, os.Symlink(outside, filepath.Join(req.WorkDir, "link"))
		}), nil, "is a symlink"},
		{"symlink in", taskFunc(func(_ context.Context, req *sdk.Request, _ sdk.Host) (*sdk.Result, error) {
			os.WriteFile(filepath.Join(req.WorkDir, "a"), nil, 0o644)
			return &sdk.Result{Files: []string{"link"}}, os.Symlink("a", filepath.Join(req.WorkDir, "link"))
		}), nil, "is a symlink"},
		{"symlinked dir out", taskFunc(func(_ context.Context, req *sdk.Request, _ sdk.Host) (*sdk.Result, error) {
			return &sdk.Result{Files: []string{"dir/secret"}}, os.Symlink(filepath.Dir(outside), filepath.Join(req.WorkDir, "dir"))
		}), nil, "escapes"},
		{"data collides", taskFunc(func(_ context.Context, req *sdk.Request, _ sdk.Host) (*sdk.Result, error) {
			return &sdk.Result{Data: []byte("x"), Files: []string{"data"}}, os.WriteFile(filepath.Join(req.WorkDir, "data"), nil, 0o644)
		}), nil, "collides with the inline Data"},
		{"params not an object", good, []int{1}, "must be a JSON object"},
		{"params not JSON", good, []byte("{"), "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Run(context.Background(), tt.task, tt.params)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
			if out != nil && out.WorkDir != "" {
				t.Errorf("work dir %s kept after a failure", out.WorkDir)
			}
		})
	}
	t.Run("error value kept", func(t *testing.T) {
		_, err := Run(context.Background(), taskFunc(func(context.Context, *sdk.Request, sdk.Host) (*sdk.Result, error) { return nil, boom }), nil)
		if !errors.Is(err, boom) {
			t.Errorf("err = %v, want boom itself", err)
		}
	})
}

func TestRunRequest(t *testing.T) {
	dir := t.TempDir()
	var got sdk.Request
	task := taskFunc(func(_ context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
		got = *req
		return nil, nil
	})
	out, err := RunRequest(context.Background(), task, &sdk.Request{TaskID: "t7", Attempt: 2, WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if got.TaskID != "t7" || got.Attempt != 2 || got.WorkDir != dir || out.WorkDir != dir {
		t.Errorf("request = %+v, outcome work dir %s", got, out.WorkDir)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("caller's work dir removed: %v", err)
	}
}

func TestHostFailsAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var perr, xerr error
	task := taskFunc(func(ctx context.Context, _ *sdk.Request, host sdk.Host) (*sdk.Result, error) {
		perr = host.Progress(ctx, 0.5, "")
		xerr = host.Partial(ctx, nil)
		return nil, nil
	})
	out, err := Run(ctx, task, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Cleanup()
	if !errors.Is(perr, context.Canceled) || !errors.Is(xerr, context.Canceled) {
		t.Errorf("callbacks after cancel: %v, %v", perr, xerr)
	}
	if len(out.Progress) != 0 {
		t.Errorf("progress recorded after cancel: %v", out.Progress)
	}
}

// sum is a reducer that concatenates the data of every task.
type concat struct{}

func (concat) Reduce(ctx context.Context, req *sdk.ReduceRequest, host sdk.Host) (*sdk.Result, error) {
	var all []byte
	for _, t := range req.Tasks {
		f, ok := t.File(sdk.DataFile)
		if !ok {
			return nil, fmt.Errorf("task %s has no data", t.TaskID)
		}
		b, err := os.ReadFile(f.Path)
		if err != nil {
			return nil, err
		}
		all = append(all, b...)
	}
	var p struct{ Name string }
	if err := req.Decode(&p); err != nil {
		return nil, err
	}
	return &sdk.Result{Files: []string{p.Name}}, os.WriteFile(filepath.Join(req.WorkDir, p.Name), all, 0o644)
}

func TestReduce(t *testing.T) {
	var outputs []sdk.TaskOutput
	for i := range 3 {
		out, err := Run(context.Background(), good, map[string]int{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Cleanup()
		outputs = append(outputs, out.Output(fmt.Sprint(i)))
	}
	red, err := Reduce(context.Background(), concat{}, map[string]string{"name": "all.json"}, outputs)
	if err != nil {
		t.Fatal(err)
	}
	defer red.Cleanup()
	if got, want := string(red.Files["all.json"]), `{"i":0}{"i":1}{"i":2}`; got != want {
		t.Errorf("reduced = %q, want %q", got, want)
	}
	if _, err := Reduce(context.Background(), concat{}, nil, []sdk.TaskOutput{{TaskID: "x"}}); err == nil || !strings.Contains(err.Error(), "no data") {
		t.Errorf("reduce without data: %v", err)
	}
}

// fakeTB records failures instead of failing the real test. Fatal stops
// the goroutine, as testing.T does; everything else goes to the real test.
type fakeTB struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Error(args ...any) { f.Errorf("%s", fmt.Sprint(args...)) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }
func (f *fakeTB) Fail()             { f.Errorf("Fail called") }
func (f *fakeTB) FailNow()          { f.Fatalf("FailNow called") }
func (f *fakeTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// check runs checkCase against a fake TB and returns its messages.
func check(t *testing.T, task sdk.Task, c Case) (failed bool, msgs string) {
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		checkCase(f, task, c)
	}()
	<-done
	return f.Failed(), strings.Join(f.msgs, "\n")
}

func TestConformanceChecks(t *testing.T) {
	cancelTimeout, cancelAfter = 300*time.Millisecond, 10*time.Millisecond
	t.Cleanup(func() { cancelTimeout, cancelAfter = CancelTimeout, 50*time.Millisecond })

	var n atomic.Int64
	counter := taskFunc(func(context.Context, *sdk.Request, sdk.Host) (*sdk.Result, error) {
		return &sdk.Result{Data: fmt.Appendf(nil, "run %d", n.Add(1))}, nil
	})
	var m atomic.Int64
	fileCounter := taskFunc(func(_ context.Context, req *sdk.Request, _ sdk.Host) (*sdk.Result, error) {
		return &sdk.Result{Files: []string{"f"}}, os.WriteFile(filepath.Join(req.WorkDir, "f"), fmt.Appendf(nil, "%d", m.Add(1)), 0o644)
	})
	var k atomic.Int64
	fileSet := taskFunc(func(_ context.Context, req *sdk.Request, _ sdk.Host) (*sdk.Result, error) {
		name := fmt.Sprint("f", k.Add(1))
		return &sdk.Result{Files: []string{name}}, os.WriteFile(filepath.Join(req.WorkDir, name), nil, 0o644)
	})
	progress := func(fs ...float64) taskFunc {
		return func(ctx context.Context, _ *sdk.Request, host sdk.Host) (*sdk.Result, error) {
			for _, f := range fs {
				host.Progress(ctx, f, "")
			}
			return nil, nil
		}
	}
	var calls atomic.Int64
	hung := make(chan string, 1) // the hung call's work dir, once it returned
	hangs := taskFunc(func(ctx context.Context, req *sdk.Request, _ sdk.Host) (*sdk.Result, error) {
		if calls.Add(1) == 3 { // the cancel check: ignore ctx for a while
			time.Sleep(time.Second)
			defer func() { hung <- req.WorkDir }()
		}
		return nil, nil
	})
	t.Cleanup(func() {
		if calls.Load() < 3 {
			return
		}
		dir := <-hung // it hung: wait till it returned and its work dir is gone
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("the hung task's work dir %s was not removed within 5s of its return", dir)
				return
			}
		}
	})

	tests := []struct {
		name string
		task sdk.Task
		want string // "" means the case must pass
	}{
		{"good", good, ""},
		{"progress ok", progress(0, 0, 0.5, 1, 1), ""},
		{"nondeterministic data", counter, `not deterministic: output "data" differs between two runs: 5 vs 5 bytes, first difference at offset 4 ("1" vs "2")`},
		{"nondeterministic file", fileCounter, `not deterministic: output "f" differs`},
		{"nondeterministic file set", fileSet, `run 1 lists files ["f1"], run 2 lists ["f2"]`},
		{"progress above 1", progress(0.5, 1.5), "progress #2 is 1.5, outside [0, 1]"},
		{"progress negative", progress(-0.1), "outside [0, 1]"},
		{"progress NaN", progress(0.1, nanValue()), "NaN, outside [0, 1]"},
		{"progress backwards", progress(0.2, 0.6, 0.4), "progress #3 is 0.4, below the 0.6"},
		{"escaping file", writes("x", "y", "../x"), "run 1: output file \"../x\" is not a local path"},
		{"missing file", writes("x", "y", "z"), "run 1: output file \"z\""},
		{"task error", taskFunc(func(context.Context, *sdk.Request, sdk.Host) (*sdk.Result, error) { return nil, errors.New("nope") }), "run 1: nope"},
		{"panic", taskFunc(func(context.Context, *sdk.Request, sdk.Host) (*sdk.Result, error) { panic("kaboom") }), "run 1: panic: kaboom"},
		{"ignores cancel", hangs, "did not return within 300ms after its context was cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failed, msgs := check(t, tt.task, Case{Params: map[string]int{"x": 1}})
			switch {
			case tt.want == "" && failed:
				t.Errorf("conformance failed:\n%s", msgs)
			case tt.want != "" && !failed:
				t.Errorf("conformance passed, want a failure mentioning %q", tt.want)
			case tt.want != "" && !strings.Contains(msgs, tt.want):
				t.Errorf("failure messages:\n%s\nwant one mentioning %q", msgs, tt.want)
			}
		})
	}
}

// verified is a task with a Verify step that accepts data "ok" only.
type verified struct{ data string }

func (v verified) Run(context.Context, *sdk.Request, sdk.Host) (*sdk.Result, error) {
	return &sdk.Result{Data: []byte(v.data)}, nil
}

func (verified) Verify(_ context.Context, req *sdk.VerifyRequest) error {
	for _, f := range req.Output {
		if f.Name == sdk.DataFile {
			b, err := os.ReadFile(f.Path)
			if err != nil {
				return err
			}
			if string(b) != "ok" {
				return fmt.Errorf("data %q is not ok", b)
			}
			return nil
		}
	}
	return errors.New("no data")
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		data, want string
	}{{"ok", ""}, {"bad", `data "bad" is not ok`}} {
		task := verified{tt.data}
		out, err := Run(ctx, task, map[string]int{"x": 1})
		if err != nil {
			t.Fatal(err)
		}
		err = Verify(ctx, task, out)
		out.Cleanup()
		if (tt.want == "" && err != nil) || (tt.want != "" && (err == nil || err.Error() != tt.want)) {
			t.Errorf("data %q: Verify = %v, want %q", tt.data, err, tt.want)
		}
		failed, msgs := check(t, task, Case{})
		if failed != (tt.want != "") || (failed && !strings.Contains(msgs, "Verify rejects the task's own output: "+tt.want)) {
			t.Errorf("data %q: conformance failed=%v:\n%s", tt.data, failed, msgs)
		}
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

func TestConformancePasses(t *testing.T) {
	Conformance(t, good, Case{Name: "object", Params: map[string]any{"a": 1}}, Case{Params: []byte(`{"b":[1,2]}`)})
	Conformance(t, good)
}

// TestConformanceFailsProcess runs the exported Conformance on a
// nondeterministic task in a child test process and expects that test to
// fail.
func TestConformanceFailsProcess(t *testing.T) {
	if os.Getenv("SDKTEST_CHILD") == "nondeterministic" {
		var n atomic.Int64
		Conformance(t, taskFunc(func(context.Context, *sdk.Request, sdk.Host) (*sdk.Result, error) {
			return &sdk.Result{Data: fmt.Appendf(nil, "%d", n.Add(1))}, nil
		}), Case{Name: "counter"})
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceFailsProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "SDKTEST_CHILD=nondeterministic")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child test: err = %v, want a failing exit; output:\n%s", err, out)
	}
	for _, want := range []string{"--- FAIL: TestConformanceFailsProcess/counter", `not deterministic: output "data" differs`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}
