package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

// echoJob is the spec of a job of n echo tasks of sleepMS each; extra is
// added at the top level (verify: ..., retries: ...).
func (e *Env) echoJob(n, sleepMS int, extra string) string {
	return fmt.Sprintf(`name: chaos
plugin: %s
params: {sleep_ms: %d}
timeout: 1m
%stasks:
  - range: {param: n, from: 0, to: %d}
`, filepath.Join(e.Root, "plugins", "echo"), sleepMS, extra, n-1)
}

// writeSpec writes body into dir/name.yaml.
func writeSpec(dir, name, body string) (string, error) {
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return "", fmt.Errorf("write spec: %w", err)
	}
	return path, nil
}

// expect returns the task digests of a clean run of the spec body: run
// once on this machine alone (no peers, no network), then remembered.
func (e *Env) expect(ctx context.Context, body string) (map[string]string, error) {
	e.mu.Lock()
	want, ok := e.clean[body]
	e.mu.Unlock()
	if ok {
		return want, nil
	}
	dir, err := e.scratch("clean")
	if err != nil {
		return nil, err
	}
	// A clean run needs no sleeping: the digests depend on the tasks'
	// parameters, and sleep_ms stays one of them.
	spec, err := writeSpec(dir, "clean", body)
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "out")
	cmd := exec.CommandContext(ctx, e.Bin, "--data", e.Data, "run", spec, "--out", out, "--no-mdns", "--no-progress", "--local-slots", "8")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("clean run: %w\n%s", err, b)
	}
	rep, err := harness.ReadReport(out)
	if err != nil {
		return nil, fmt.Errorf("clean run: %w", err)
	}
	want = map[string]string{}
	for _, t := range rep.Tasks {
		if t.State != report.TaskDone {
			return nil, fmt.Errorf("clean run: task %s %s", t.ID, t.State)
		}
		want[t.ID] = t.Digest
	}
	e.mu.Lock()
	if e.clean == nil {
		e.clean = map[string]map[string]string{}
	}
	e.clean[body] = want
	e.mu.Unlock()
	return want, nil
}

// tailLines is the end of a long text, for error messages.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
