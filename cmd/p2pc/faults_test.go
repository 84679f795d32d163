package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

const echoSpec = `
name: echo
plugin: {{repo}}/plugins/echo
tasks:
  - range: {param: n, from: 0, to: %d}
`

// nodeIDPattern matches a node ID as peers are named in messages.
const nodeIDPattern = `[a-z2-7]{4}(-[a-z2-7]{4}){6}`

// excludedFor returns the reason peer was excluded for, or "".
func excludedFor(rep *report.Report, peer string) string {
	for _, e := range rep.Excluded {
		if e.Peer == peer {
			return e.Reason
		}
	}
	return ""
}

// A peer whose every result is malformed is excluded after three
// strikes: alone, the job ends (exit 3) saying so; with an honest peer,
// the job completes without it.
func TestMalformedPeerIsExcluded(t *testing.T) {
	dir := t.TempDir()
	bad := startPeer(t, dir, "bad", 2, "--fault-malformed")
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(echoSpec, 11))

	out := filepath.Join(dir, "alone")
	start := time.Now()
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", bad.addr, "--wait-peers", "2s")
	took := time.Since(start)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3\n%s", r.code, r.stderr)
	}
	// Peers are named by name@NODEID, the ID their handshake proved.
	for _, want := range []string{`no progress`, `bad@` + nodeIDPattern + `: excluded: sent 3 malformed results`, `digest mismatch`} {
		if !regexp.MustCompile(want).MatchString(r.stderr) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	rep := readReport(t, out)
	if why := excludedFor(rep, "bad"); !strings.Contains(why, "malformed") {
		t.Errorf("report: bad excluded for %q, want malformed results; excluded %+v", why, rep.Excluded)
	}
	if rep.State != report.StateFailed || !strings.Contains(rep.Error, "no progress") {
		t.Errorf("report state %q error %q, want failed with no progress", rep.State, rep.Error)
	}
	// Three strikes exclude the peer; a few more leases may be in flight
	// (2 slots and a prefetch of 1, each settled once): not hundreds.
	attempts, lost := 0, 0
	for _, task := range rep.Tasks {
		attempts += len(task.Attempts)
		for _, a := range task.Attempts {
			if a.Outcome == report.OutcomeLost {
				lost++
			}
		}
	}
	if lost < 3 || lost > 6 || attempts > 12 {
		t.Errorf("%d attempts, %d lost, before the peer was excluded; want 3 to 6 lost, at most 12 in all", attempts, lost)
	}
	t.Logf("ended in %s after %d attempts", took.Round(time.Millisecond), attempts)

	good := startPeer(t, dir, "good", 2)
	out = filepath.Join(dir, "both")
	r = p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--min-peers", "2", "--join", addrs([]*peer{bad, good}))
	if r.code != 0 {
		t.Fatalf("with an honest peer: exit %d\n%s", r.code, r.stderr)
	}
	rep = readReport(t, out)
	checkOnce(t, rep)
	if excludedFor(rep, "bad") == "" {
		t.Errorf("bad was not excluded: %+v", rep.Excluded)
	}
	if n := sharesOf(rep)["bad"]; n != 0 {
		t.Errorf("%d malformed results accepted", n)
	}
}

// A peers-only run whose only peer refuses the job ends with exit 3 and
// the peer's reason, in bounded time (--wait-peers); with --wait-peers 0 it waits and
// says why.
func TestRefusedEverywhereStalls(t *testing.T) {
	dir := t.TempDir()
	// The peer cannot store plugins: a file stands where its plugin folder
	// goes, so it refuses every job.
	data := filepath.Join(dir, "broken")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "plugins"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	broken := startPeer(t, dir, "broken", 2)
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(echoSpec, 3))
	out := filepath.Join(dir, "out")
	start := time.Now()
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", broken.addr, "--wait-peers", "2s")
	took := time.Since(start)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3\n%s", r.code, r.stderr)
	}
	for _, want := range []string{`no progress: 4 task\(s\) left`, `broken@` + nodeIDPattern + `: refused the job: cannot prepare the job`} {
		if !regexp.MustCompile(want).MatchString(r.stderr) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if took > 20*time.Second {
		t.Errorf("took %s to give up, want about 2s", took)
	}
	rep := readReport(t, out)
	for _, task := range rep.Tasks {
		if task.State != report.TaskPending {
			t.Errorf("task %s %s, want pending (a rerun resumes it)", task.ID, task.State)
		}
	}
	t.Logf("gave up after %s", took.Round(time.Millisecond))

	// Asked to wait, the run waits, and says why, until interrupted.
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0",
		"--join", broken.addr, "--stall-after", "1s", "--wait-peers", "0"}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(run.Stderr(), "waiting for peers") {
		select {
		case <-run.Done():
			t.Fatalf("--wait-peers: the run ended\n%s", run.Stderr())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("--wait-peers: the run does not say why it waits\n%s", run.Stderr())
		}
	}
	if !regexp.MustCompile(`broken@` + nodeIDPattern + `: refused the job`).MatchString(run.Stderr()) {
		t.Errorf("--wait-peers: the run does not name the refusal\n%s", run.Stderr())
	}
	run.Signal(syscall.SIGINT)
	if code, err := run.Wait(30 * time.Second); err != nil || code != 130 {
		t.Errorf("interrupted: exit %d, %v, want 130", code, err)
	}
}

const inputEchoSpec = `
name: echo-in
plugin: {{repo}}/plugins/echo
inputs: [in.bin]
tasks:
  - range: {param: n, from: 0, to: 5}
`

// flipBytes damages every regular file under root, the bit rot a block
// store must survive: in place (same size), or, for a file that runs
// (text file busy), by a damaged copy renamed over it.
func flipBytes(t *testing.T, root string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil || len(data) == 0 {
			return err
		}
		data[0] ^= 0xff
		n++
		// Stores keep their files read-only; root writes them anyway, an
		// ordinary user makes them writable for the damage.
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if perm := fi.Mode().Perm(); perm&0o200 == 0 {
			if err := os.Chmod(path, perm|0o200); err != nil {
				return err
			}
			defer os.Chmod(path, perm)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if errors.Is(err, syscall.ETXTBSY) {
			if err := os.WriteFile(path+".rot", data, 0o755); err != nil {
				return err
			}
			return os.Rename(path+".rot", path)
		}
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteAt(data[:1], 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A peer whose stored blocks (input and plugin) and exported plugin rot
// between two jobs fetches them again and runs the second job.
func TestCorruptBlocksOnAPeerAreFetchedAgain(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	p := startPeer(t, dir, "rot", 2)
	in := make([]byte, 3<<20) // more than one block
	for i := range in {
		in[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.bin"), in, 0o644); err != nil {
		t.Fatal(err)
	}
	spec := writeSpec(t, dir, "e.yaml", inputEchoSpec)
	run := func(out string) {
		t.Helper()
		r := p2pc(t, "run", spec, "--out", filepath.Join(dir, out), "--no-mdns", "--local-slots", "0", "--join", p.addr, "--wait-peers", "10s")
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", out, r.code, r.stderr)
		}
		for _, task := range readReport(t, filepath.Join(dir, out)).Tasks {
			if task.Peer != "rot" {
				t.Errorf("%s: task %s ran on %q, want rot", out, task.ID, task.Peer)
			}
		}
	}
	run("first")
	blocksN := flipBytes(t, filepath.Join(p.data, "store", "blocks"))
	pluginN := flipBytes(t, filepath.Join(p.data, "plugins"))
	if blocksN < 3 || pluginN != 1 {
		t.Fatalf("damaged %d blocks and %d plugin copies, want >= 3 and 1", blocksN, pluginN)
	}
	run("second")
	if !strings.Contains(p.proc.Stderr(), "fetching them again") {
		t.Errorf("the peer's log does not say it fetched corrupt blocks again")
	}
}
