package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/plugins/sdk/sdktest"
)

func TestMain(m *testing.M) {
	// run starts this test binary again as the supervisor of a command.
	if isSupervisor() {
		supervise()
		return
	}
	os.Exit(m.Run())
}

// input writes a file with content in a temp dir and returns it as an
// input named name.
func input(t *testing.T, name, content string) sdk.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(p, []byte(content), 0o444); err != nil {
		t.Fatal(err)
	}
	return sdk.File{Name: name, Path: p}
}

func TestExec(t *testing.T) {
	lines := input(t, "lines.txt", "a\nb\nc\n")
	nested := input(t, "dir/sub/n.txt", "nested\n")
	script := input(t, "run.sh", "echo \"script $1\"\n")
	tests := []struct {
		name   string
		params map[string]any
		inputs []sdk.File
		data   string            // want this data
		files  map[string]string // want these output files
		err    string            // want an error mentioning this
	}{
		{name: "argv", params: map[string]any{"command": []string{"echo", "hello", "a  b"}}, data: "hello a  b\n"},
		{name: "no shell expansion", params: map[string]any{"command": []string{"echo", "$HOME", "*"}}, data: "$HOME *\n"},
		{name: "absolute command", params: map[string]any{"command": []string{"/bin/echo", "x"}}, data: "x\n"},
		{name: "shell", params: map[string]any{"command": []string{"echo", "$((6*7))", "|", "tr", "4", "X"}, "shell": true}, data: "X2\n"},
		{name: "shell single string", params: map[string]any{"command": []string{"wc -l < lines.txt > count.txt"}, "shell": true, "outputs": []string{"count.txt"}},
			inputs: []sdk.File{lines}, files: map[string]string{"count.txt": "3\n"}},
		{name: "inputs by name", params: map[string]any{"command": []string{"cat", "lines.txt", "dir/sub/n.txt"}},
			inputs: []sdk.File{lines, nested}, data: "a\nb\nc\nnested\n"},
		{name: "inputs are symlinks", params: map[string]any{"command": []string{"test", "-L", "lines.txt"}}, inputs: []sdk.File{lines}},
		{name: "copy inputs", params: map[string]any{"command": []string{"sh", "-c", "test ! -L lines.txt && echo more >> lines.txt && cat lines.txt"}, "copy_inputs": true},
			inputs: []sdk.File{lines}, data: "a\nb\nc\nmore\n"},
		{name: "script via interpreter", params: map[string]any{"command": []string{"sh", "run.sh", "ran"}}, inputs: []sdk.File{script}, data: "script ran\n"},
		{name: "relative command", params: map[string]any{"command": []string{"./tool"}}, err: "no such file"},
		{name: "stdout off", params: map[string]any{"command": []string{"echo", "hidden"}, "stdout": false}, data: ""},
		{name: "outputs in subdir", params: map[string]any{"command": []string{"mkdir -p o && echo 1 > o/a && echo 2 > b"}, "shell": true, "outputs": []string{"o/a", "b"}},
			data: "", files: map[string]string{"o/a": "1\n", "b": "2\n"}},
		{name: "task params as env", params: map[string]any{"command": []string{"echo $P2PC_PARAM_BAND $P2PC_PARAM_NAME_2 $P2PC_PARAM_ON $P2PC_TASK_ID"}, "shell": true, "band": 7, "name-2": "x y", "on": true},
			data: "7 x y true task\n"},
		{name: "exit status", params: map[string]any{"command": []string{"echo oops >&2; echo out; exit 7"}, "shell": true}, err: "sh exited with status 7; stderr:\noops\n"},
		{name: "exit status empty stderr", params: map[string]any{"command": []string{"false"}}, err: "false exited with status 1 (stderr was empty)"},
		{name: "killed by signal", params: map[string]any{"command": []string{"kill -9 $$"}, "shell": true}, err: "sh was killed (signal: killed)"},
		{name: "not found", params: map[string]any{"command": []string{"no-such-command-p2pc"}}, err: `command "no-such-command-p2pc" not found in PATH /usr/local/bin:/usr/bin:/bin`},
		{name: "missing outputs", params: map[string]any{"command": []string{"touch", "b"}, "outputs": []string{"a", "b", "c/d"}}, err: "declared outputs missing after the command: a, c/d"},
		{name: "output is a directory", params: map[string]any{"command": []string{"mkdir", "d"}, "outputs": []string{"d"}}, err: "output d is not a regular file"},
		{name: "output is a symlink", params: map[string]any{"command": []string{"true"}, "outputs": []string{"lines.txt"}}, inputs: []sdk.File{lines}, err: "output lines.txt is not a regular file"},
		{name: "output absolute", params: map[string]any{"command": []string{"true"}, "outputs": []string{"/etc/passwd"}}, err: `output "/etc/passwd" is not a local path`},
		{name: "output escapes", params: map[string]any{"command": []string{"true"}, "outputs": []string{"../x"}}, err: `output "../x" is not a local path`},
		{name: "output twice", params: map[string]any{"command": []string{"true"}, "outputs": []string{"a", "./a"}}, err: "declared twice"},
		{name: "no command", params: map[string]any{"shell": true}, err: "need a command"},
		{name: "empty command", params: map[string]any{"command": []string{""}}, err: "need a command"},
		{name: "command not a list", params: map[string]any{"command": "echo hi"}, err: "decode params"},
		{name: "bad env", params: map[string]any{"command": []string{"true"}, "env": map[string]string{"A=B": "c"}}, err: "not a valid environment variable"},
		{name: "bad input name", params: map[string]any{"command": []string{"true"}}, inputs: []sdk.File{{Name: "../up", Path: lines.Path}}, err: `input name "../up" is not a local path`},
		{name: "input named tmp", params: map[string]any{"command": []string{"true"}}, inputs: []sdk.File{{Name: "tmp", Path: lines.Path}}, err: "make TMPDIR"},
		{name: "normalize outputs and stdout", params: map[string]any{"command": []string{"printf '# at 1\\nA\\n' | tee a.txt; printf '# at 2\\nB\\n' > b.txt"}, "shell": true, "outputs": []string{"a.txt", "b.txt"},
			"normalize": map[string]any{"command": []string{"sed", "/^# at /d"}}},
			data: "A\n", files: map[string]string{"a.txt": "A\n", "b.txt": "B\n"}},
		{name: "normalize named outputs", params: map[string]any{"command": []string{"echo x; echo y > a.txt; echo z > b.txt"}, "shell": true, "outputs": []string{"a.txt", "b.txt"},
			"normalize": map[string]any{"command": []string{"echo $P2PC_OUTPUT; tr a-z A-Z"}, "shell": true, "outputs": []string{"b.txt"}}},
			data: "x\n", files: map[string]string{"a.txt": "y\n", "b.txt": "b.txt\nZ\n"}},
		{name: "normalize fails", params: map[string]any{"command": []string{"echo", "x"}, "normalize": map[string]any{"command": []string{"sh", "-c", "echo bad >&2; exit 3"}}},
			err: "exec: normalize data: exec: sh exited with status 3; stderr:\nbad"},
		{name: "normalize an undeclared output", params: map[string]any{"command": []string{"true"}, "normalize": map[string]any{"command": []string{"cat"}, "outputs": []string{"c.txt"}}},
			err: `normalize output "c.txt" is not a declared output`},
		{name: "output names expand params", params: map[string]any{"command": []string{"echo $P2PC_PARAM_SCENE > $P2PC_PARAM_SCENE.png; mkdir -p d7 && echo 7 > d7/x"}, "shell": true, "scene": "hall", "n": 7,
			"outputs": []string{"$P2PC_PARAM_SCENE.png", "d${P2PC_PARAM_N}/x"}, "normalize": map[string]any{"command": []string{"tr", "a-z", "A-Z"}, "outputs": []string{"${P2PC_PARAM_SCENE}.png"}}},
			files: map[string]string{"hall.png": "HALL\n", "d7/x": "7\n"}},
		{name: "output name expands out of the work dir", params: map[string]any{"command": []string{"true"}, "scene": "../../etc/x", "outputs": []string{"$P2PC_PARAM_SCENE.png"}},
			err: `output "$P2PC_PARAM_SCENE.png" is "../../etc/x.png" once expanded: not a local path inside the work dir`},
		{name: "output name expands to an absolute path", params: map[string]any{"command": []string{"true"}, "outputs": []string{"$HOME/x"}}, err: "not a local path inside the work dir"},
		{name: "output name of an unset param", params: map[string]any{"command": []string{"true"}, "outputs": []string{"$P2PC_PARAM_SCENE.png"}}, err: `output "$P2PC_PARAM_SCENE.png": $P2PC_PARAM_SCENE is not set`},
		{name: "output name with a bare $", params: map[string]any{"command": []string{"true"}, "outputs": []string{"a$.png"}}, err: "starts no variable name"},
		{name: "output names expand to one", params: map[string]any{"command": []string{"true"}, "a": "x", "b": "x", "outputs": []string{"$P2PC_PARAM_A", "$P2PC_PARAM_B"}}, err: `output "x" is declared twice`},
		{name: "normalize without command", params: map[string]any{"command": []string{"true"}, "normalize": map[string]any{"shell": true}}, err: "need a normalize.command"},
		{name: "normalize with stdout", params: map[string]any{"command": []string{"true"}, "normalize": map[string]any{"command": []string{"cat"}, "stdout": false}}, err: "takes no stdout param"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := sdktest.Run(context.Background(), &execTask{}, tt.params, tt.inputs...)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer out.Cleanup()
			if got := string(out.Files[sdk.DataFile]); got != tt.data {
				t.Errorf("data = %q, want %q", got, tt.data)
			}
			for name, want := range tt.files {
				if got, ok := out.Files[name]; !ok || string(got) != want {
					t.Errorf("file %s = %q (present %v), want %q", name, got, ok, want)
				}
			}
		})
	}
	if b, err := os.ReadFile(lines.Path); err != nil || string(b) != "a\nb\nc\n" {
		t.Errorf("input changed: %q, %v", b, err)
	}
}

// TestReduce runs the reduce command over two tasks' outputs: it finds
// them under P2PC_TASKS_DIR in the order of P2PC_TASK_IDS.
func TestReduce(t *testing.T) {
	ctx := context.Background()
	task := &execTask{}
	var outs []sdk.TaskOutput
	for _, id := range []string{"0001", "0000"} {
		o, err := sdktest.RunRequest(ctx, task, &sdk.Request{JobID: "j", TaskID: id,
			Params: []byte(`{"command":["echo band $P2PC_TASK_ID > band.txt; echo out $P2PC_TASK_ID"],"shell":true,"outputs":["band.txt"]}`)})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Cleanup()
		outs = append(outs, o.Output(id))
	}
	tests := []struct {
		name, params string
		data         string
		files        map[string]string
		err          string
	}{
		{name: "stitch", params: `{"reduce":{"command":["for t in $P2PC_TASK_IDS; do cat $P2PC_TASKS_DIR/$t/band.txt tasks/$t/data; done > all.txt; echo $P2PC_JOB_ID ${P2PC_TASK_ID-none}"],"shell":true,"outputs":["all.txt"]}}`,
			data: "j none\n", files: map[string]string{"all.txt": "band 0001\nout 0001\nband 0000\nout 0000\n"}},
		{name: "output names expand the job's params", params: `{"scene":"hall","reduce":{"command":["echo $P2PC_PARAM_SCENE > ${P2PC_PARAM_SCENE}.txt"],"shell":true,"outputs":["${P2PC_PARAM_SCENE}.txt"]}}`,
			files: map[string]string{"hall.txt": "hall\n"}},
		{name: "output name of an unset param", params: `{"reduce":{"command":["true"],"outputs":["$P2PC_PARAM_SCENE.txt"]}}`, err: `reduce.output "$P2PC_PARAM_SCENE.txt": $P2PC_PARAM_SCENE is not set`},
		{name: "no reduce param", params: `{"command":["true"]}`, err: "params has no reduce: {command: [...]}"},
		{name: "bad reduce output", params: `{"reduce":{"command":["true"],"outputs":["../x"]}}`, err: `reduce.output "../x" is not a local path`},
		{name: "missing output", params: `{"reduce":{"command":["true"],"outputs":["image.pgm"]}}`, err: "declared outputs missing after the command: image.pgm (reduce)"},
		{name: "reduce fails", params: `{"reduce":{"command":["false"]}}`, err: "false exited with status 1 (stderr was empty) (reduce)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work := t.TempDir()
			res, err := task.Reduce(ctx, &sdk.ReduceRequest{JobID: "j", Params: []byte(tt.params), Tasks: outs, WorkDir: work}, nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Data) != tt.data {
				t.Errorf("data = %q, want %q", res.Data, tt.data)
			}
			for name, want := range tt.files {
				b, err := os.ReadFile(filepath.Join(work, name))
				if err != nil || string(b) != want || !slices.Contains(res.Files, name) {
					t.Errorf("file %s = %q, %v (listed: %v), want %q", name, b, err, res.Files, want)
				}
			}
		})
	}
}

func TestEnvironment(t *testing.T) {
	out, err := sdktest.RunRequest(context.Background(), &execTask{}, &sdk.Request{
		JobID:  "j1",
		TaskID: "t1",
		Params: []byte(`{"command":["env"],"env":{"LANG":"C.UTF-8","PATH":"/bin"},"n":1.50,"o":{"x":1},"l":[1],"z":null}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Cleanup()
	got := strings.Split(strings.TrimSpace(string(out.Files[sdk.DataFile])), "\n")
	slices.Sort(got)
	want := []string{
		"HOME=" + out.WorkDir,
		"LANG=C.UTF-8",
		"P2PC_JOB_ID=j1",
		`P2PC_PARAMS={"command":["env"],"env":{"LANG":"C.UTF-8","PATH":"/bin"},"n":1.50,"o":{"x":1},"l":[1],"z":null}`,
		"P2PC_PARAM_N=1.50",
		"P2PC_TASK_ID=t1",
		"PATH=/bin",
		"TMPDIR=" + filepath.Join(out.WorkDir, "tmp"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("environment:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if fi, err := os.Stat(filepath.Join(out.WorkDir, "tmp")); err != nil || !fi.IsDir() {
		t.Errorf("TMPDIR not made: %v", err)
	}
}

func TestStderrTail(t *testing.T) {
	// 10000 lines of "line N" on stderr, then a failure.
	_, err := sdktest.Run(context.Background(), &execTask{}, map[string]any{
		"command": []string{"i=0; while [ $i -lt 10000 ]; do echo line $i >&2; i=$((i+1)); done; exit 3"},
		"shell":   true,
	})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	head, tail, ok := strings.Cut(msg, fmt.Sprintf("last %d bytes of stderr:\n", StderrTail))
	if !ok || !strings.Contains(head, "status 3") {
		t.Fatalf("error = %.200q", msg)
	}
	if len(tail) != StderrTail || !strings.HasSuffix(tail, "line 9999\n") || strings.Contains(tail, "line 1000\n") {
		t.Errorf("tail: %d bytes, ends %q", len(tail), tail[max(0, len(tail)-30):])
	}
}

func TestStdoutLimit(t *testing.T) {
	_, err := sdktest.Run(context.Background(), &execTask{}, map[string]any{
		"command": []string{"head", "-c", strconv.Itoa(MaxStdout + 1), "/dev/zero"},
	})
	if err == nil || !strings.Contains(err.Error(), "more than 67108864 bytes to stdout") {
		t.Errorf("err = %v", err)
	}
}

func TestLimitBuffer(t *testing.T) {
	b := limitBuffer{max: 5}
	for _, s := range []string{"ab", "cde", "fg", "h"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("write %q: %d, %v", s, n, err)
		}
	}
	if string(b.Bytes()) != "abcde" || !b.overflow {
		t.Errorf("%q overflow=%v", b.Bytes(), b.overflow)
	}
}

func TestTailBuffer(t *testing.T) {
	b := tailBuffer{max: 4}
	var all string
	for i := range 100 {
		s := strconv.Itoa(i)
		all += s
		b.Write([]byte(s))
		if got, want := string(b.Bytes()), all[max(0, len(all)-4):]; got != want {
			t.Fatalf("after %q: %q, want %q", all, got, want)
		}
	}
	if !b.truncated || cap(b.buf) > 64 {
		t.Errorf("truncated=%v cap=%d", b.truncated, cap(b.buf))
	}
}

func TestConformance(t *testing.T) {
	lines := input(t, "lines.txt", "one\ntwo\n")
	sdktest.Conformance(t, &execTask{},
		sdktest.Case{Name: "echo", Params: map[string]any{"command": []string{"echo", "hi"}}},
		sdktest.Case{Name: "wc", Params: map[string]any{"command": []string{"wc -l < lines.txt > count.txt"}, "shell": true, "outputs": []string{"count.txt"}}, Inputs: []sdk.File{lines}},
		sdktest.Case{Name: "slow", Params: map[string]any{"command": []string{"sleep", "0.2"}}},
	)
}

func TestDescribe(t *testing.T) {
	if info := (&execTask{}).Describe(); info.Name != "exec" || info.Portable {
		t.Errorf("info = %+v", info)
	}
}

// BenchmarkTrue measures the overhead of one command: staging, the
// supervisor (on Linux) and /bin/true.
func BenchmarkTrue(b *testing.B) {
	task := &execTask{}
	for b.Loop() {
		dir := b.TempDir()
		req := &sdk.Request{TaskID: "t", Params: []byte(`{"command":["true"]}`), WorkDir: dir}
		if _, err := task.Run(context.Background(), req, nil); err != nil {
			b.Fatal(err)
		}
	}
}
