package taskrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// The test binary is also the plugin (real processes, no build step):
// with P2PC_TASKRUN_PLUGIN=1 it serves testTask.
const envPlugin = "P2PC_TASKRUN_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(envPlugin) != "" {
		sdk.Serve(testTask{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type testTask struct{}

type params struct {
	Mode string `json:"mode"` // data, file, fail, sleep, progress
}

func (testTask) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	var p params
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, err
	}
	switch p.Mode {
	case "data":
		return &sdk.Result{Data: []byte("hello " + req.TaskID)}, nil
	case "file":
		if err := os.WriteFile(filepath.Join(req.WorkDir, "out.txt"), []byte("file of "+req.TaskID), 0o644); err != nil {
			return nil, err
		}
		return &sdk.Result{Files: []string{"out.txt"}, Data: []byte("x")}, nil
	case "fail":
		return nil, &sdk.TaskError{Msg: "the task failed"}
	case "sleep":
		select {
		case <-time.After(time.Minute):
		case <-ctx.Done():
		}
		return nil, ctx.Err()
	case "progress":
		if err := host.Progress(ctx, 0.5, "half"); err != nil {
			return nil, err
		}
		return &sdk.Result{}, nil
	}
	return nil, errors.New("unknown mode " + p.Mode)
}

// testPool starts a pool of this test binary as the plugin. Its tasks are
// confined as on a peer: the work folders they get must lie in the
// returned folder, which the pool grants them read-write.
func testPool(t *testing.T) (*pluginhost.Pool, string) {
	t.Helper()
	works := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sum, err := digest.File(exe)
	if err != nil {
		t.Fatal(err)
	}
	pool := pluginhost.NewPool(pluginhost.Config{Path: exe, Checksum: sum, Env: []string{envPlugin + "=1"}, Sandbox: sandbox.Policy{ReadWrite: []string{works}}}, 2)
	t.Cleanup(func() { pool.Close() })
	return pool, works
}

type progressHost struct {
	sdk.UnsupportedHost
	got chan string
}

func (h *progressHost) Progress(_ context.Context, _ float64, note string) error {
	h.got <- note
	return nil
}

func (h *progressHost) Partial(context.Context, []byte) error { return nil }

// TestRun runs attempts in real plugin processes: outcomes, staging,
// digests, the timeout and cancellation all come out of the one path.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts plugin processes")
	}
	pool, works := testPool(t)
	tests := []struct {
		name      string
		mode      string
		inlineMax int
		timeout   time.Duration
		cancel    bool
		outcome   string
		files     []string
		inline    bool
	}{
		{name: "inline data, staged", mode: "data", outcome: report.OutcomeOK, files: []string{sdk.DataFile}},
		{name: "inline data, in memory", mode: "data", inlineMax: 1024, outcome: report.OutcomeOK, inline: true},
		{name: "files", mode: "file", inlineMax: 1024, outcome: report.OutcomeOK, files: []string{sdk.DataFile, "out.txt"}},
		{name: "task error", mode: "fail", outcome: report.OutcomeTaskError},
		{name: "timeout", mode: "sleep", timeout: 300 * time.Millisecond, outcome: report.OutcomeTimeout},
		{name: "canceled", mode: "sleep", cancel: true, outcome: report.OutcomeCanceled},
		{name: "host callbacks", mode: "progress", outcome: report.OutcomeOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			host := &progressHost{got: make(chan string, 1)}
			if tc.cancel {
				time.AfterFunc(300*time.Millisecond, cancel)
			}
			timeout := tc.timeout
			if timeout == 0 {
				timeout = time.Minute
			}
			params, _ := json.Marshal(params{Mode: tc.mode})
			work, err := os.MkdirTemp(works, "work")
			if err != nil {
				t.Fatal(err)
			}
			out := Run(ctx, pool, work, Attempt{JobID: "job", TaskID: "t1", Params: params, Timeout: timeout, Host: host, InlineMax: tc.inlineMax})
			if out.Outcome != tc.outcome {
				t.Fatalf("outcome %q (err %v), want %q", out.Outcome, out.Err, tc.outcome)
			}
			if (out.Err == nil) != (tc.outcome == report.OutcomeOK) {
				t.Fatalf("err %v with outcome %q", out.Err, out.Outcome)
			}
			if tc.mode == "progress" {
				if note := <-host.got; note != "half" {
					t.Errorf("progress note %q", note)
				}
			}
			if out.Outcome != report.OutcomeOK {
				if out.Stage != "" {
					t.Errorf("stage %q after a failure", out.Stage)
				}
				if _, err := os.Stat(work + ".out"); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("stage left behind after a failure: %v", err)
				}
				return
			}
			if out.Inline != tc.inline {
				t.Errorf("inline %v, want %v", out.Inline, tc.inline)
			}
			if out.Inline {
				if want := outputs.DigestInline([]byte("hello t1")); out.Digest != want || string(out.Data) != "hello t1" {
					t.Errorf("inline output %q digest %s, want digest %s", out.Data, out.Digest, want)
				}
				return
			}
			if tc.files != nil && !slices.Equal(out.Files, tc.files) {
				t.Errorf("files %v, want %v", out.Files, tc.files)
			}
			if tc.files == nil && out.Stage == "" {
				t.Errorf("no stage for an ok output")
			}
			d, _, err := outputs.Digest(out.Stage)
			if err != nil || d != out.Digest {
				t.Errorf("digest %s, stage hashes to %s (%v)", out.Digest, d, err)
			}
		})
	}
}

// TestCollect covers staging without processes.
func TestCollect(t *testing.T) {
	tamper := func(stage string) error { return os.WriteFile(filepath.Join(stage, "lie"), []byte("lie"), 0o644) }
	tests := []struct {
		name      string
		res       *sdk.Result
		file      string // made in the work folder before Collect
		inlineMax int
		tamper    func(string) error
		inline    bool
		files     []string
		taskErr   bool
	}{
		{name: "nothing, staged", res: &sdk.Result{}, files: nil},
		{name: "nothing, inline", res: &sdk.Result{}, inlineMax: 1, inline: true},
		{name: "data within the inline bound", res: &sdk.Result{Data: []byte("abc")}, inlineMax: 3, inline: true},
		{name: "data beyond the inline bound", res: &sdk.Result{Data: []byte("abcd")}, inlineMax: 3, files: []string{sdk.DataFile}},
		{name: "a file is always staged", res: &sdk.Result{Files: []string{"f"}}, file: "f", inlineMax: 1 << 20, files: []string{"f"}},
		{name: "tamper forces staging", res: &sdk.Result{Data: []byte("a")}, inlineMax: 1 << 20, tamper: tamper, files: []string{sdk.DataFile, "lie"}},
		{name: "escaping file", res: &sdk.Result{Files: []string{"../x"}}, taskErr: true},
		{name: "missing file", res: &sdk.Result{Data: []byte("a"), Files: []string{"gone"}}, taskErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			work := filepath.Join(t.TempDir(), "work")
			if err := os.Mkdir(work, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(work, tc.file), []byte("content"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := Collect(work, tc.res, tc.inlineMax, tc.tamper)
			if tc.taskErr {
				var te *sdk.TaskError
				if !errors.As(err, &te) {
					t.Fatalf("err %v, want a task error", err)
				}
				if _, err := os.Stat(work + ".out"); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("stage left behind: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.Inline != tc.inline {
				t.Fatalf("inline %v, want %v", out.Inline, tc.inline)
			}
			if out.Inline {
				if out.Stage != "" || out.Digest != outputs.DigestInline(tc.res.Data) {
					t.Errorf("inline output: stage %q digest %s", out.Stage, out.Digest)
				}
				if _, err := os.Stat(work + ".out"); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("inline output staged: %v", err)
				}
				return
			}
			if out.Stage != work+".out" || !slices.Equal(out.Files, tc.files) {
				t.Errorf("stage %q files %v, want %q %v", out.Stage, out.Files, work+".out", tc.files)
			}
			if d, _, err := outputs.Digest(out.Stage); err != nil || d != out.Digest {
				t.Errorf("digest %s, stage hashes to %s (%v)", out.Digest, d, err)
			}
		})
	}
}

// TestRunBatchClean: RunBatch tells work, and its caller, when the slot's
// folder is known empty (the last task there was seen to leave it so),
// whether the plugin looked (a batch) or the host did (a single call), so
// neither looks again; after a task that left files it is not.
func TestRunBatchClean(t *testing.T) {
	if testing.Short() {
		t.Skip("starts plugin processes")
	}
	pool, works := testPool(t)
	dir := filepath.Join(works, "slot")
	items := func(modes ...string) []Item {
		var out []Item
		for i, m := range modes {
			out = append(out, Item{Ctx: context.Background(), Attempt: Attempt{
				JobID: "j", TaskID: fmt.Sprintf("t%d", i), Params: []byte(`{"mode":"` + m + `"}`),
				Timeout: 10 * time.Second, InlineMax: 1024, Disk: 1 << 20,
				Stage: filepath.Join(works, fmt.Sprintf("t%d.out", i)),
			}})
		}
		return out
	}
	for _, c := range []struct {
		name  string
		modes []string
		works []bool // the clean each work call got
		clean bool
	}{
		{"batch of clean tasks", []string{"data", "data", "fail"}, []bool{false}, true},
		{"a task that leaves files", []string{"data", "file", "data"}, []bool{false, false}, true},
		{"last task leaves files", []string{"data", "file"}, []bool{false}, false},
		{"single call", []string{"data"}, []bool{false}, true},
		{"single call with files", []string{"file"}, []bool{false}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []bool
			work := func(clean bool) (string, error) {
				got = append(got, clean)
				if !clean {
					os.RemoveAll(dir)
					if err := os.Mkdir(dir, 0o755); err != nil {
						return "", err
					}
				}
				return dir, nil
			}
			its := items(c.modes...)
			clean := RunBatch(context.Background(), pool, its, work, func(i int, out Output) {
				want := report.OutcomeOK
				if c.modes[i] == "fail" {
					want = report.OutcomeTaskError
				}
				if out.Outcome != want {
					t.Errorf("task %d: %s (%v), want %s", i, out.Outcome, out.Err, want)
				}
				os.RemoveAll(its[i].Stage)
			})
			if fmt.Sprint(got) != fmt.Sprint(c.works) || clean != c.clean {
				t.Errorf("work got %v, returned clean %v; want %v, %v", got, clean, c.works, c.clean)
			}
			if ents, _ := os.ReadDir(dir); clean && len(ents) > 0 {
				t.Errorf("clean, but the folder holds %d entries", len(ents))
			}
		})
	}
}
