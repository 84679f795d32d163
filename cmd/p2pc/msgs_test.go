package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/internal/report"
)

// The tests of this file check what p2pc tells its user: every failure
// with its reason, no silent wait, progress that tells done from failed.

// A verified task whose replicas disagree fails loudly: the summary line
// says failed (never "ok") and why, naming the digests and who voted for
// each; report.json has the same reason in the task's error.
func TestNoQuorumSaysWhy(t *testing.T) {
	dir := t.TempDir()
	peers := []*peer{startPeer(t, dir, "qa", 1), startPeer(t, dir, "qb", 1)}
	// Every run prints another number: the replicas never agree.
	spec := writeSpec(t, dir, "nd.yaml", `
name: nd
plugin: {{repo}}/plugins/exec
params:
  command: ["echo $$ $(date +%N) > out.txt"]
  shell: true
  outputs: [out.txt]
verify: {replicas: 2}
tasks:
  - range: {param: n, from: 1, to: 2}
`)
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "2", "--join", addrs(peers))
	if r.code != exitTaskFailed {
		t.Fatalf("exit %d, want %d\n%s", r.code, exitTaskFailed, r.stderr)
	}
	line := regexp.MustCompile(`task 000[01] failed after 2 attempts: no quorum \(2 matching votes and a majority needed, 2 votes\): digest [0-9a-f]{12} from q[ab]; digest [0-9a-f]{12} from q[ab]\n`)
	if n := len(line.FindAllString(r.stderr, -1)); n != 2 {
		t.Errorf("the summary names the votes of %d tasks, want 2:\n%s", n, r.stderr)
	}
	if strings.Contains(r.stderr, ": ok after") {
		t.Errorf("a failed task is summed up as ok:\n%s", r.stderr)
	}
	rep := readReport(t, out)
	for _, task := range rep.Tasks {
		if task.State != report.TaskFailed || !strings.Contains(task.Error, "no quorum") ||
			!strings.Contains(task.Error, "from qa") || !strings.Contains(task.Error, "from qb") {
			t.Errorf("task %s: state %s, error %q; want failed with the votes", task.ID, task.State, task.Error)
		}
		for _, v := range task.Votes {
			if !strings.Contains(task.Error, fmt.Sprintf("digest %.12s from %s", v.Digest, v.Peer)) {
				t.Errorf("task %s: error %q does not name %s's vote %.12s", task.ID, task.Error, v.Peer, v.Digest)
			}
		}
	}
}
