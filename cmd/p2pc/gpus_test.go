package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/sandbox"
)

// fakeGPUs makes a fake inventory of two GPUs: device nodes as plain
// files under a root (P2PC_GPU_ROOT, test-only) and an nvidia-smi script
// first in PATH. It returns the root and the environment that selects it.
func fakeGPUs(t *testing.T, dir string) (root string, env []string) {
	t.Helper()
	root = filepath.Join(dir, "gpuroot")
	bin := filepath.Join(dir, "gpubin")
	for _, d := range []string{filepath.Join(root, "dev"), bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"} {
		// 0666, as the driver makes them: tasks may run as another user.
		if err := os.WriteFile(filepath.Join(root, "dev", n), []byte(n+"\n"), 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(root, "dev", n), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	smi := "#!/bin/sh\nprintf '0, GPU-fake-0, Fake GPU, 1024, 00000000:01:00.0\\n1, GPU-fake-1, Fake GPU, 1024, 00000000:02:00.0\\n'\n"
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	return root, []string{"P2PC_GPU_ROOT=" + root, "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// gpuJob is an exec job of n tasks that need a GPU: each writes the
// device its slot bound (CUDA_VISIBLE_DEVICES), writes to its own fake
// GPU node, and tries to read the other GPU's node.
const gpuJob = `
name: gpus
plugin: {{repo}}/plugins/exec
params:
  root: %q
  command: ['echo "cuda=$CUDA_VISIBLE_DEVICES nvidia=$NVIDIA_VISIBLE_DEVICES" > out.txt; case $CUDA_VISIBLE_DEVICES in GPU-fake-0) own=0 other=1;; GPU-fake-1) own=1 other=0;; *) own=x other=x;; esac; if echo task 2>>err.txt >> $P2PC_PARAM_ROOT/dev/nvidia$own; then echo own=opened >> out.txt; else echo own=refused >> out.txt; fi; if cat $P2PC_PARAM_ROOT/dev/nvidia$other > /dev/null; then echo other=opened >> out.txt; else echo other=refused >> out.txt; fi']
  shell: true
  outputs: [out.txt, err.txt]
resources: {gpus: 1}
retries: 0
tasks:
  - range: {param: n, from: 0, to: 3}
`

// TestGPUsWithoutAGPU: a peer started with --gpus all on a fake inventory
// of two GPUs offers two GPU slots; a job with resources {gpus: 1} runs
// there only, each task sees its own slot's device in
// CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES, may open its own GPU's
// node and (with Landlock) not the other's, and report.json names the
// device of each attempt.
func TestGPUsWithoutAGPU(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	root, env := fakeGPUs(t, dir)
	p, addr, _ := startJoin(t, dir, "gpupeer", env, "--gpus", "all", "--ui", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := p.WaitStderr(ctx, regexp.MustCompile(`GPU slot 1: GPU 1: Fake GPU, 1024 MiB, GPU-fake-1 \(\S+/dev/nvidia1\)`)); err != nil {
		t.Fatalf("join does not list its GPU slots: %v\n%s", err, p.Stderr())
	}
	if !strings.Contains(p.Stderr(), "GPU slot 0: GPU 0: Fake GPU, 1024 MiB, GPU-fake-0") {
		t.Errorf("join does not list GPU slot 0:\n%s", p.Stderr())
	}
	// p2pc peers and the web view show them.
	r := p2pc(t, "peers", "--no-mdns", "--join", addr, "--json", "--wait", "1s")
	var peers []struct {
		Name  string `json:"name"`
		Slots int    `json:"slots"`
		GPUs  string `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &peers); err != nil || len(peers) != 1 || peers[0].GPUs != "2 × Fake GPU" || peers[0].Slots != 4 {
		t.Errorf("p2pc peers --json: %+v (%v), want 4 slots and gpus \"2 × Fake GPU\"\n%s", peers, err, r.stdout)
	}
	waitStderr(t, p, webViewRe)
	url := webViewRe.FindStringSubmatch(p.Stderr())[1]
	resp, err := http.Get(url[:strings.Index(url, "/?token=")] + "/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Peers []struct {
			GPUs string `json:"gpus"`
		} `json:"peers"`
	}
	err = json.NewDecoder(resp.Body).Decode(&snap)
	resp.Body.Close()
	if err != nil || len(snap.Peers) == 0 || snap.Peers[0].GPUs != "2 × Fake GPU" {
		t.Errorf("web view: %+v (%v), want this peer's gpus", snap, err)
	}

	spec := writeSpec(t, dir, "gpus.yaml", strings.Replace(gpuJob, "%q", strconvQuote(root), 1))
	out := filepath.Join(dir, "out")
	r = p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addr, "--wait-peers", "30s")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	confined := sandbox.Probe().LandlockABI > 0
	line := regexp.MustCompile(`^cuda=(GPU-fake-[01]) nvidia=(GPU-fake-[01])\nown=(\w+)\nother=(\w+)\n$`)
	rep := readReport(t, out)
	used := map[string]bool{}
	for _, task := range rep.Tasks {
		b, err := os.ReadFile(filepath.Join(out, "tasks", task.ID, "out.txt"))
		if err != nil {
			t.Fatal(err)
		}
		m := line.FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("task %s wrote %q", task.ID, b)
		}
		if m[1] != m[2] {
			t.Errorf("task %s: CUDA_VISIBLE_DEVICES %s, NVIDIA_VISIBLE_DEVICES %s", task.ID, m[1], m[2])
		}
		if m[3] != "opened" {
			e, _ := os.ReadFile(filepath.Join(out, "tasks", task.ID, "err.txt"))
			t.Errorf("task %s could not open its own GPU's node: %s", task.ID, e)
		}
		if confined && m[4] != "refused" {
			t.Errorf("task %s opened the other GPU's node (Landlock ABI %d)", task.ID, sandbox.Probe().LandlockABI)
		}
		a := task.Attempts[len(task.Attempts)-1]
		if !strings.HasSuffix(a.Device, ", "+m[1]) {
			t.Errorf("task %s ran with %s, report.json says device %q", task.ID, m[1], a.Device)
		}
		used[m[1]] = true
	}
	if len(rep.Tasks) != 4 {
		t.Fatalf("%d tasks in the report, want 4", len(rep.Tasks))
	}
	if !confined {
		t.Log("no Landlock here: the other GPU's node is not checked")
	}
	t.Logf("devices used: %v", used)
}

// TestGPUJobOfOneTask: a GPU job of one task runs on a peer of eight CPU
// slots and two GPU slots. Its lease must wake a GPU slot's runner, not
// the CPU slots' runners that have waited longer: a wake-up spent on a
// CPU slot left the lease queued on the peer until another lease came,
// and after a job's last lease none comes.
func TestGPUJobOfOneTask(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	root, env := fakeGPUs(t, dir)
	_, addr, _ := startJoin(t, dir, "gpupeer", env, "--gpus", "all", "--slots", "8")
	job := strings.Replace(strings.Replace(gpuJob, "%q", strconvQuote(root), 1), "to: 3}", "to: 0}", 1)
	spec := writeSpec(t, dir, "gpu1.yaml", job)
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addr, "--wait-peers", "30s")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	if len(rep.Tasks) != 1 || len(rep.Tasks[0].Attempts) == 0 {
		t.Fatalf("report: %+v, want one task with its attempt", rep.Tasks)
	}
	if d := rep.Tasks[0].Attempts[0].Device; !strings.Contains(d, "GPU-fake-") {
		t.Errorf("the task ran with device %q, want one of the fake GPUs", d)
	}
}

// TestGPUJobWithoutGPUPeer: a job whose tasks need a GPU, with only a peer
// that offers none, fails at --wait-peers saying which resource is
// missing.
func TestGPUJobWithoutGPUPeer(t *testing.T) {
	dir := t.TempDir()
	_, addr, _ := startJoin(t, dir, "cpupeer", nil)
	spec := writeSpec(t, dir, "gpu.yaml", "plugin: {{repo}}/plugins/echo\nresources: {gpus: 1}\ntasks:\n  - range: {param: n, from: 0, to: 1}\n")
	r := p2pc(t, "run", spec, "--out", filepath.Join(dir, "out"), "--no-mdns", "--local-slots", "1", "--join", addr, "--wait-peers", "6s")
	if r.code != exitTaskFailed {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	for _, want := range []string{
		"a task needs 1 GPU (resources.gpus), this peer gives its tasks 0 GPUs (p2pc join --gpus)",
		"(--wait-peers)",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the run does not say %q:\n%s", want, r.stderr)
		}
	}
}

// TestGPUsFlag: --gpus asks for more GPUs than the machine has: bad input.
func TestGPUsFlag(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	_, env := fakeGPUs(t, dir)
	r := p2pcEnv(t, env, "--data", filepath.Join(dir, "d"), "join", "--listen", "127.0.0.1:0", "--no-mdns", "--gpus", "3")
	if r.code != exitBadInput || !strings.Contains(r.stderr, "--gpus 3: this machine has 2 NVIDIA GPU(s)") {
		t.Fatalf("exit %d, want %d and the reason\n%s", r.code, exitBadInput, r.stderr)
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
