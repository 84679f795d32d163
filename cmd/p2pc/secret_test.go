package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// descendants lists pid's children, their children, and so on.
func descendants(pid int) []int {
	var out []int
	for _, c := range childPids(pid) {
		out = append(out, c)
		out = append(out, descendants(c)...)
	}
	return out
}

// procHolds says which of pid's command line and environment hold s
// ("" if neither does, or the process is gone).
func procHolds(pid int, s string) string {
	var where []string
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err == nil && strings.Contains(strings.ToLower(string(b)), strings.ToLower(s)) {
			where = append(where, f)
		}
	}
	return strings.Join(where, " and ")
}

// TestSecretNotInProcessTable: the pasted `p2pc join --swarm TOKEN` line
// works as the one step, but neither the running peer nor the processes
// it starts (plugins, their tasks), nor a `p2pc run --swarm TOKEN`, hold
// the token in their command line (which every user can read) or
// environment, while a job runs on the peer.
func TestSecretNotInProcessTable(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	token, err := harness.NewSwarmToken()
	if err != nil {
		t.Fatal(err)
	}
	body := token[len("p2pc1-"):]
	env := []string{"P2PC_SWARM=", "XDG_CONFIG_HOME=" + filepath.Join(dir, "cfg")}
	j, addr, _ := startJoin(t, dir, "sj", env, "--slots", "1", "--swarm", token)
	if w := procHolds(j.Pid(), body); w != "" {
		t.Errorf("the running join holds the token in its %s", w)
	}
	spec := writeSpec(t, dir, "s.yaml", `
name: hold
plugin: {{repo}}/plugins/exec
params:
  command: ["sleep 2; echo ok > out.txt"]
  shell: true
  outputs: [out.txt]
tasks:
  - range: {param: n, from: 0, to: 2}
`)
	run, err := harness.Start(p2pcBin, []string{"--data", filepath.Join(dir, "sub"), "run", spec, "--out", filepath.Join(dir, "out"),
		"--no-mdns", "--local-slots", "0", "--join", addr, "--wait-peers", "30s", "--no-progress", "--swarm", token},
		harness.Options{Name: "run", Env: append(env, "XDG_CONFIG_HOME="+filepath.Join(dir, "cfg-run"))})
	if err != nil {
		t.Fatal(err)
	}
	// Wait until a task runs on the peer: a shell its plugin started.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var task int
	for task == 0 {
		for _, pid := range descendants(j.Pid()) {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), "sleep 2") {
				task = pid
			}
		}
		select {
		case <-ctx.Done():
			run.Kill()
			var tree []string
			for _, pid := range descendants(j.Pid()) {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				tree = append(tree, fmt.Sprintf("%d %q", pid, b))
			}
			t.Fatalf("no task started on the peer; its processes:\n%s\nrun:\n%s", strings.Join(tree, "\n"), run.Stderr())
		case <-run.Done():
			t.Fatalf("the run ended before a task was seen on the peer:\n%s", run.Stderr())
		case <-time.After(20 * time.Millisecond):
		}
	}
	procs := map[string]int{"join": j.Pid(), "run": run.Pid()}
	for _, pid := range descendants(j.Pid()) {
		procs[fmt.Sprintf("join's descendant %d", pid)] = pid
	}
	for _, pid := range descendants(run.Pid()) {
		procs[fmt.Sprintf("run's descendant %d", pid)] = pid
	}
	if len(procs) < 4 { // join, run, the plugin, the task's shell
		t.Errorf("only %d processes to look at: %v", len(procs), procs)
	}
	for name, pid := range procs {
		if w := procHolds(pid, body); w != "" {
			t.Errorf("%s (pid %d) holds the swarm token in its %s", name, pid, w)
		}
	}
	code, err := run.Wait(2 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 || !strings.Contains(run.Stderr(), "3 of 3 tasks done") {
		t.Fatalf("the job on the peer: exit %d\n%s", code, run.Stderr())
	}
	// The token given once was kept for next time.
	if r := p2pcEnv(t, env, "--data", filepath.Join(dir, "sj"), "swarm", "show"); r.stdout != "p2pc join --swarm "+token+"\n" {
		t.Errorf("the token was not kept: %q %s", r.stdout, r.stderr)
	}
	// `--swarm -` reads it from stdin.
	cmd := exec.Command(p2pcBin, "--data", filepath.Join(dir, "stdin"), "--swarm-file", filepath.Join(dir, "none"), "swarm", "show", "--swarm", "-")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(token + "\n")
	if out, err := cmd.Output(); err != nil || string(out) != "p2pc join --swarm "+token+"\n" {
		t.Errorf("--swarm -: %v %q", err, out)
	}
}
