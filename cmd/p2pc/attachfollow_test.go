package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// TestAttachFollowsTakeover: an attach running when the job's owner is
// SIGKILLed follows the job to the member that takes it over, shows its
// progress to the end and writes the output folder (a clean run's
// outputs, each task accepted once).
func TestAttachFollowsTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (about 30 s): a takeover")
	}
	dir := t.TempDir()
	const tasks = 1200
	peers, id, owner, spec := takeoverSwarm(t, dir, 3, 2, tasks, 30)
	other := notOwner(t, peers, owner.name)
	out := filepath.Join(dir, "attached")
	att, err := harness.Start(p2pcBin, []string{"--data", dataDir, "attach", id[:12], "--out", out, "--no-mdns", "--join", other.addr}, harness.Options{Name: "attach"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { att.Stop(5 * time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A progress line with some tasks done: the attach follows the owner.
	if _, err := att.WaitStderr(ctx, regexp.MustCompile(`moving: [1-9][0-9]+ of 1200 done`)); err != nil {
		t.Fatalf("attach showed no progress: %v\n%s", err, att.Stderr())
	}
	owner.proc.Kill()
	t.Logf("owner %s SIGKILLed", owner.name)
	code, err := att.Wait(180 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	stderr := att.Stderr()
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "p2pc: ") {
			t.Logf("attach said: %s", l)
		}
	}
	if code != 0 {
		t.Fatalf("attach: exit %d after the owner died\n%s", code, stderr)
	}
	if m := regexp.MustCompile(`following its owner (\S+) \(epoch (\d+)\)`).FindStringSubmatch(stderr); m == nil || m[1] == owner.name || m[2] == "1" {
		t.Errorf("attach did not say it follows the new owner (the old one was %s):\n%s", owner.name, stderr)
	}
	if !strings.Contains(stderr, "moving: 1200 of 1200 done, 0 failed, 0 running, 0 queued") {
		t.Errorf("attach did not show the progress to the end:\n%s", stderr)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	if rep.State != "complete" || len(rep.Tasks) != tasks {
		t.Errorf("attached output folder: %s with %d tasks, want complete with %d", rep.State, len(rep.Tasks), tasks)
	}
	sameAsCleanRun(t, dir, spec, rep)
}
