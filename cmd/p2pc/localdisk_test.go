package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

const bigEchoSpec = `
name: big
plugin: {{repo}}/plugins/echo
params: {output_bytes: 1048576}
tasks:
  - range: {param: n, from: 0, to: 11}
`

// localDiskScript runs in a private mount namespace: the output folder's
// parent is a 6 MiB tmpfs, too small for the job's 12 MiB of outputs.
// First run: the disk fills up. Then the tmpfs grows (space freed) and
// the job is run again; then the tmpfs is made read-only and a third run
// tries; last, the job runs on local slots only into a 3 MiB tmpfs (the
// job database fills up with the outputs). What
// each left is copied out of the namespace into $KEEP.
const localDiskScript = `
set -u
mount -t tmpfs -o size=6m tmpfs "$ROOT" || exit 90
run() { "$P2PC" --data "$DATA" run "$SPEC" --out "$ROOT/out" --no-mdns --local-slots 0 --join "$PEER" --wait-peers 10s --no-progress; }
run; echo "exit full: $?" >&2
mkdir -p "$KEEP/full"; cp "$ROOT/out/"job.db* "$KEEP/full/"; ls -A "$ROOT/out" > "$KEEP/full.ls"
mount -o remount,size=64m "$ROOT" || exit 91
run; echo "exit freed: $?" >&2
cp -r "$ROOT/out" "$KEEP/out"
# The remount can find the mount busy for a moment after the run's exit
# (a process of it still exiting?): ask again for up to 3 s.
tries=0
until mount -o remount,ro "$ROOT" 2>/dev/null; do
  tries=$((tries+1)); [ $tries -ge 30 ] && { mount -o remount,ro "$ROOT"; exit 92; }
  sleep 0.1
done
[ $tries -gt 0 ] && echo "remount read-only: busy $tries time(s)" >&2
run; echo "exit read-only: $?" >&2
mount -t tmpfs -o size=3m tmpfs "$ROOT2" || exit 93
"$P2PC" --data "$DATA" run "$SPEC" --out "$ROOT2/out" --no-mdns --local-slots 2 --no-progress; echo "exit local slots: $?" >&2
ls -A "$ROOT2/out" > "$KEEP/local.ls"
exit 0
`

// A full output folder stops the run at once with exit 4 and a clear
// error, charges no peer, leaves nothing half-written; a rerun after
// space is freed completes, reusing what was done. A read-only one is
// exit 4 too, and so is a full one written by local slots.
// requireMountNS skips the test unless this process can make a private
// mount namespace (unshare --mount: root or CAP_SYS_ADMIN), for a tmpfs.
func requireMountNS(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare (util-linux)")
	}
	if out, err := exec.Command("unshare", "--mount", "true").CombinedOutput(); err != nil {
		t.Skipf("needs a private mount namespace (root or CAP_SYS_ADMIN): unshare --mount: %v: %s", err, bytes.TrimSpace(out))
	}
}

func TestLocalDiskFaultStopsTheRun(t *testing.T) {
	parallel(t)
	requireMountNS(t)
	dir := t.TempDir()
	p := startPeer(t, dir, "ok", 2)
	root, root2, keep := filepath.Join(dir, "mnt"), filepath.Join(dir, "mnt2"), filepath.Join(dir, "keep")
	for _, d := range []string{root, root2, keep} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec := writeSpec(t, dir, "big.yaml", bigEchoSpec)
	start := time.Now()
	proc, err := harness.Start("unshare", []string{"--mount", "--propagation", "private", "sh", "-c", localDiskScript}, harness.Options{
		Name: "localdisk",
		Env:  []string{"ROOT=" + root, "ROOT2=" + root2, "KEEP=" + keep, "P2PC=" + p2pcBin, "DATA=" + dataDir, "SPEC=" + spec, "PEER=" + p.addr},
	})
	if err != nil {
		t.Fatal(err)
	}
	code, err := proc.Wait(2 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stderr := proc.Stderr()
	if code != 0 {
		t.Fatalf("script: exit %d\n%s", code, stderr)
	}
	t.Logf("four runs took %s", time.Since(start).Round(time.Millisecond))
	out := filepath.Join(root, "out")
	for _, want := range []string{
		"exit full: 4",
		"exit freed: 0",
		"exit read-only: 4", "read-only file system",
		"exit local slots: 4",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	// Whichever write meets the full disk first says so: an output's
	// (placed in the folder, or probed after a plugin's failed write), or
	// the job database's, where outputs of up to 1 MiB go from memory.
	saysFull := func(dir string) bool {
		return strings.Contains(stderr, "p2pc: output folder "+dir+": no space left on device") ||
			regexp.MustCompile(`p2pc: job database `+regexp.QuoteMeta(filepath.Join(dir, jobdb.FileName))+`: \w+: disk full`).MatchString(stderr)
	}
	if !saysFull(out) {
		t.Errorf("stderr does not say the output folder is full:\n%s", stderr)
	}
	if !saysFull(filepath.Join(root2, "out")) {
		t.Errorf("stderr does not say the local slots' output folder is full:\n%s", stderr)
	}
	if n := len(regexp.MustCompile(`no space left on device`).FindAllString(stderr, -1)); n > 10 {
		t.Errorf("%d lines about the full disk: the run went on after it", n)
	}
	if strings.Contains(stderr, "peer excluded") {
		t.Errorf("a peer was charged for the submitter's disk:\n%s", stderr)
	}
	// The run's state is in job.db (report.json could not be written on
	// the full disk, nor perhaps the database's last row: then the job
	// still reads as running, and p2pc status calls it interrupted).
	full, err := jobdb.ReadReport(context.Background(), filepath.Join(keep, "full"))
	if err != nil {
		t.Fatal(err)
	}
	if full.State == report.StateFailed && !strings.Contains(full.Error, "no space left on device") ||
		full.State != report.StateFailed && full.State != report.StateRunning {
		t.Errorf("first run's job.db: state %s, error %q", full.State, full.Error)
	}
	for _, task := range full.Tasks {
		for _, a := range task.Attempts {
			if a.Outcome == report.OutcomeLost {
				t.Errorf("task %s: attempt lost (charged to %s): %s", task.ID, a.Peer, a.Error)
			}
		}
	}
	for _, name := range []string{"full.ls", "local.ls"} {
		if ls, _ := os.ReadFile(filepath.Join(keep, name)); strings.Contains(string(ls), ".p2pc\n") {
			t.Errorf("%s: the run left its staging behind: %s", name, ls)
		}
	}
	freed := readReport(t, filepath.Join(keep, "out"))
	if freed.State != report.StateComplete || freed.Summary.Done != 12 {
		t.Fatalf("rerun: state %s, %d done", freed.State, freed.Summary.Done)
	}
	// Outputs of up to 1 MiB live in job.db: written out, each is whole.
	if r := p2pc(t, "export", filepath.Join(keep, "out")); r.code != 0 {
		t.Fatalf("export: exit %d\n%s", r.code, r.stderr)
	}
	for _, task := range freed.Tasks {
		fi, err := os.Stat(filepath.Join(keep, "out", "tasks", task.ID, "data"))
		if err != nil || fi.Size() != 1<<20 {
			t.Errorf("task %s: output %v, %v", task.ID, fi, err)
		}
	}
	t.Logf("done before the disk filled: %d of 12", full.Summary.Done)
}

// peerDiskScript starts `p2pc join` in a private mount namespace with its
// data folder on a 64 MiB tmpfs that a 63 MiB file fills: it cannot store
// the job's plugin until the file is removed (through /proc/PID/root).
const peerDiskScript = `
set -u
mount -t tmpfs -o size=64m tmpfs "$ROOT" || exit 90
head -c 66060288 /dev/zero > "$ROOT/filler"
exec "$P2PC" --data "$ROOT/data" join --listen 127.0.0.1:0 --name full --slots 2 --no-mdns
`

// A peer whose disk is full refuses the job; the refusal may pass, so the
// job asks it again, and once space is freed the job runs on it.
func TestPeerDiskFullRefusalPasses(t *testing.T) {
	parallel(t)
	requireMountNS(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "mnt")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	peer, err := harness.Start("unshare", []string{"--mount", "--propagation", "private", "sh", "-c", peerDiskScript}, harness.Options{
		Name: "full", Env: []string{"ROOT=" + root, "P2PC=" + p2pcBin},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Stop(5 * time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := peer.WaitOutput(ctx, listenRe)
	if err != nil {
		t.Fatal(err)
	}
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(echoSpec, 5))
	out := filepath.Join(dir, "out")
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0",
		"--join", m[1], "--wait-peers", "0", "--stall-after", "3s"}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Kill()
	waitStderr(t, peer, regexp.MustCompile(`refused a job.*no space left on device`))
	freed := time.Now()
	if err := os.Remove(fmt.Sprintf("/proc/%d/root%s/filler", peer.Pid(), root)); err != nil {
		t.Fatal(err)
	}
	code, err := run.Wait(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, run.Stderr())
	}
	for _, task := range readReport(t, out).Tasks {
		if task.Peer != "full" {
			t.Errorf("task %s ran on %q", task.ID, task.Peer)
		}
	}
	if !strings.Contains(run.Stderr(), "it will be asked again") {
		t.Errorf("the run does not say the refusal may pass:\n%s", run.Stderr())
	}
	t.Logf("completed %s after the space was freed", time.Since(freed).Round(time.Millisecond))
}
