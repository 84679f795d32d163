package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

// An arm64 peer on this amd64 machine: p2pc cross-built for linux/arm64,
// run by qemu-user through binfmt_misc (Debian's qemu-user-static, its
// qemu-aarch64 entry registered with the F flag, so that the interpreter
// is found inside the sandbox's namespaces too).

var arm64 struct {
	// one is held by the test that uses the arm64 peer: qemu's emulation
	// takes a core, so two such tests at once only slow each other down.
	one      sync.Mutex
	once     sync.Once
	bin      string
	skip     string // why there is no arm64 peer here
	buildErr error
}

// arm64P2pc returns the linux/arm64 p2pc binary, or skips saying what is
// missing.
func arm64P2pc(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("no arm64 peer: the test runs one under qemu-user on linux/amd64, this is " + runtime.GOOS + "/" + runtime.GOARCH)
	}
	if testing.Short() {
		t.Skip("cross-builds p2pc for linux/arm64 and runs a peer under qemu (a minute or more)")
	}
	arm64.one.Lock()
	t.Cleanup(arm64.one.Unlock)
	arm64.once.Do(func() {
		if err := binfmtAarch64(); err != nil {
			arm64.skip = err.Error()
			return
		}
		arm64.bin = filepath.Join(filepath.Dir(p2pcBin), "p2pc-linux-arm64")
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		// -trimpath, as pluginbuild's cross builds: they share the
		// compiled standard library and SDK dependencies for arm64.
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", arm64.bin, "./cmd/p2pc")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			arm64.buildErr = fmt.Errorf("build p2pc for linux/arm64: %w\n%s", err, out)
			return
		}
		out, err := exec.Command(arm64.bin, "version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "linux/arm64") {
			arm64.skip = fmt.Sprintf("no arm64 peer: qemu-aarch64 through binfmt_misc did not run the linux/arm64 p2pc: %v: %s", err, out)
		}
	})
	if arm64.buildErr != nil {
		t.Fatal(arm64.buildErr)
	}
	if arm64.skip != "" {
		t.Skip(arm64.skip)
	}
	return arm64.bin
}

const binfmtDir = "/proc/sys/fs/binfmt_misc"

// binfmtAarch64 makes sure binfmt_misc runs linux/arm64 executables
// through qemu: it mounts binfmt_misc and registers Debian's qemu-aarch64
// entry if they are missing (root only), or says what is missing.
func binfmtAarch64() error {
	entry := filepath.Join(binfmtDir, "qemu-aarch64")
	if b, err := os.ReadFile(entry); err == nil {
		if !strings.HasPrefix(string(b), "enabled") {
			return errors.New("no arm64 peer: binfmt_misc's qemu-aarch64 entry is disabled (echo 1 > " + entry + ")")
		}
		return nil
	}
	const conf = "/usr/lib/binfmt.d/qemu-aarch64.conf"
	line, err := os.ReadFile(conf)
	if err != nil {
		return fmt.Errorf("no arm64 peer: qemu-user-static is not installed (apt-get install qemu-user-static; .ci/run does): %w", err)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("no arm64 peer: binfmt_misc has no qemu-aarch64 entry, and registering it needs root: as root, mount -t binfmt_misc binfmt_misc %s; cat %s > %s/register", binfmtDir, conf, binfmtDir)
	}
	if _, err := os.Stat(filepath.Join(binfmtDir, "register")); err != nil {
		if out, err := exec.Command("mount", "-t", "binfmt_misc", "binfmt_misc", binfmtDir).CombinedOutput(); err != nil {
			return fmt.Errorf("no arm64 peer: binfmt_misc is not mounted and mounting it failed: %v: %s", err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(binfmtDir, "register"), line, 0); err != nil {
		return fmt.Errorf("no arm64 peer: register qemu-aarch64 with binfmt_misc: %w", err)
	}
	return nil
}

// mixedSwarm starts one amd64 and one arm64 peer, one slot each, on
// hosts of their own, without mDNS (qemu-user cannot join multicast
// groups; the submitter --joins them).
func mixedSwarm(t *testing.T, dir string) []*peer {
	t.Helper()
	bin := arm64P2pc(t)
	return []*peer{
		startPeerOnHost(t, dir, "amd64", 2, 1, "--no-mdns"),
		startPeerBin(t, bin, dir, "arm64", "127.0.0.3:0", 1, "--no-mdns"),
	}
}

// runMixed runs spec on peers alone (--local-slots 0) into out, with
// extra flags, and returns its report.
func runMixed(t *testing.T, spec, out string, peers []*peer, extra ...string) *report.Report {
	t.Helper()
	args := append([]string{"run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addrs(peers)}, extra...)
	if r := p2pc(t, args...); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	return readReport(t, out)
}

// checkBothRan fails unless every task is done once and both peers
// accepted some.
func checkBothRan(t *testing.T, rep *report.Report, peers []*peer) map[string]int {
	t.Helper()
	checkOnce(t, rep)
	shares := sharesOf(rep)
	for _, p := range peers {
		if shares[p.name] == 0 {
			t.Errorf("peer %s ran no task: %v (warnings %q)", p.name, shares, rep.Warnings)
		}
	}
	return shares
}

// TestMixedPlatformsMandelbrot: the README demo (a Go folder plugin) on an
// amd64 and an arm64 peer, none on the submitter: the submitter
// cross-builds the plugin for arm64, both peers run tasks, and the image
// and the job ID are a local run's.
func TestMixedPlatformsMandelbrot(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := mixedSwarm(t, dir)
	spec := filepath.Join(repoRoot, "examples", "mandelbrot.yaml")
	out := filepath.Join(dir, "out")
	rep := runMixed(t, spec, out, peers, "--min-peers", "2")
	shares := checkBothRan(t, rep, peers)
	if lr := checkLocalImage(t, spec, out, filepath.Join(dir, "local")); lr.JobID != rep.JobID {
		t.Errorf("job ID %s on the swarm, %s locally: the ID covers the source, not one platform's binary", rep.JobID, lr.JobID)
	}
	t.Logf("shares: %v; %s", shares, speeds(rep))
}

// speeds says each peer's mean time per accepted attempt (the start of
// the call to its result), for the figures of results/adhoc.
func speeds(rep *report.Report) string {
	sum, n := map[string]time.Duration{}, map[string]int{}
	for _, task := range rep.Tasks {
		for _, a := range task.Attempts {
			if a.Outcome == report.OutcomeOK && !a.End.IsZero() {
				sum[a.Peer] += a.End.Sub(a.Start)
				n[a.Peer]++
			}
		}
	}
	var parts []string
	for _, p := range []string{"amd64", "arm64"} {
		if n[p] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d tasks, mean %v a task", p, n[p], (sum[p]/time.Duration(n[p])).Round(time.Millisecond)))
		}
	}
	return strings.Join(parts, "; ")
}

// checkLocalImage runs spec on this machine alone into local, fails
// unless its mandelbrot.png is the one in out, and returns its report.
func checkLocalImage(t *testing.T, spec, out, local string) *report.Report {
	t.Helper()
	if r := p2pc(t, "run", spec, "--out", local, "--no-mdns"); r.code != 0 {
		t.Fatalf("local run: exit %d\n%s", r.code, r.stderr)
	}
	a, _ := os.ReadFile(filepath.Join(out, "mandelbrot.png"))
	b, _ := os.ReadFile(filepath.Join(local, "mandelbrot.png"))
	if len(a) == 0 || string(a) != string(b) {
		t.Errorf("mixed swarm's PNG (%d bytes) differs from the local run's (%d bytes)", len(a), len(b))
	}
	return readReport(t, local)
}

// execPerPlatform is an exec job whose command differs per platform: each
// task prints which entry its plugin (built for its peer's platform)
// picked. (Under qemu-user, sh and uname are this machine's amd64
// programs: only the p2pc and plugin executables are arm64.)
const execPerPlatform = `
name: perplatform
plugin: {{repo}}/plugins/exec
params:
  command:
    linux/amd64: ["sh", "-c", "sleep 0.5; echo amd64 entry"]
    linux/arm64: ["sh", "-c", "echo arm64 entry"]
    windows: ["cmd", "/c", "echo windows entry"]
tasks:
  - range: {param: i, from: 1, to: 16}
timeout: 1m
batch: off
`

// TestMixedPlatformsExec: an exec job with per-platform commands on the
// mixed swarm: both peers run tasks, each its own platform's command
// (the amd64 one slowed, one task a call, so the emulated peer gets some).
func TestMixedPlatformsExec(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := mixedSwarm(t, dir)
	spec := writeSpec(t, dir, "e.yaml", execPerPlatform)
	out := filepath.Join(dir, "out")
	rep := runMixed(t, spec, out, peers, "--min-peers", "2")
	shares := checkBothRan(t, rep, peers)
	want := map[string]string{"amd64": "amd64 entry\n", "arm64": "arm64 entry\n"}
	for _, task := range rep.Tasks {
		if b := taskData(t, out, task.ID); string(b) != want[task.Peer] {
			t.Errorf("task %s on %s printed %q, want %q", task.ID, task.Peer, b, want[task.Peer])
		}
	}
	t.Logf("shares: %v", shares)
}

// writeArmlessPlugin writes a Go plugin module that builds for every
// platform but arm64 (a file only arm64 compiles names nothing), against
// the SDK of this repository.
func writeArmlessPlugin(t *testing.T, dir string) {
	t.Helper()
	sdkMod, err := os.ReadFile(filepath.Join(repoRoot, "plugins", "sdk", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(repoRoot, "plugins", "sdk", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	// The SDK's requirements, all of them indirect here.
	_, reqs, _ := strings.Cut(string(sdkMod), "\nrequire")
	mod := "module example.com/armless\n\ngo 1.26.0\n\nrequire github.com/p2pc/p2pc/plugins/sdk v0.0.0\n\nrequire" + reqs +
		"\nreplace github.com/p2pc/p2pc/plugins/sdk => " + filepath.Join(repoRoot, "plugins", "sdk") + "\n"
	files := map[string]string{
		"go.mod": mod,
		"go.sum": string(sum),
		"main.go": `package main

import (
	"context"

	"github.com/p2pc/p2pc/plugins/sdk"
)

type task struct{}

func (task) Run(ctx context.Context, req *sdk.Request, host sdk.Host) (*sdk.Result, error) {
	return &sdk.Result{Data: []byte(req.TaskID)}, nil
}

func main() { sdk.Serve(task{}) }
`,
		"broken_arm64.go": "package main\n\nvar _ = notOnArm64\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// freeAddr is a loopback address of host 127.0.0.<host> with a port
// nothing listens on (the tests run in a private network namespace:
// nothing else takes it before the peer does).
func freeAddr(t *testing.T, host int) string {
	t.Helper()
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:0", host))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestMixedPlatformsCrossBuildFails: a Go plugin that does not build for
// arm64. The arm64 peer gets no task and the report says why; the amd64
// peer runs every task.
func TestMixedPlatformsCrossBuildFails(t *testing.T) {
	parallel(t)
	bin := arm64P2pc(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "armless")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	writeArmlessPlugin(t, src)
	spec := writeSpec(t, dir, "a.yaml", "name: armless\nplugin: ./armless\ntasks:\n  - range: {param: i, from: 1, to: 8}\n")
	checkTurnedAway(t, bin, dir, spec, "peer arm64", "(linux/arm64) gets no task", "cross-build failed", "for linux/arm64", "notOnArm64")
}

// TestMixedPlatformsOneExecutable: a plugin given as one executable runs
// on its own platform only; the arm64 peer gets no task, and the report
// says why.
func TestMixedPlatformsOneExecutable(t *testing.T) {
	parallel(t)
	bin := arm64P2pc(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "mandelbrot")
	cmd := exec.Command("go", "build", "-trimpath", "-o", exe, ".")
	cmd.Dir = filepath.Join(repoRoot, "plugins", "mandelbrot")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the plugin: %v\n%s", err, out)
	}
	spec := writeSpec(t, dir, "m.yaml", strings.Replace(fmt.Sprintf(mandelbrotSpec, 8, 7), "{{repo}}/plugins/mandelbrot", exe, 1))
	checkTurnedAway(t, bin, dir, spec, "peer arm64 (linux/arm64) gets no task", "the plugin is an executable for linux/amd64", "list one per platform")
}

// checkTurnedAway runs spec with the arm64 peer first, then, once the
// run turned it away, an amd64 peer, which must run every task; the
// report's warnings must say every one of want.
func checkTurnedAway(t *testing.T, bin, dir, spec string, want ...string) {
	t.Helper()
	arm := startPeerBin(t, bin, dir, "arm64", "127.0.0.3:0", 1, "--no-mdns")
	amdAddr := freeAddr(t, 2)
	out := filepath.Join(dir, "out")
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0",
		"--join", arm.addr + "," + amdAddr}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Stop(5 * time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := run.WaitStderr(ctx, regexp.MustCompile(`peer gets no task`)); err != nil {
		t.Fatalf("the arm64 peer was not turned away: %v", err)
	}
	startPeerAt(t, dir, "amd64", amdAddr, 1, "--no-mdns")
	rep := waitReport(t, run, out)
	checkOnce(t, rep)
	if shares := sharesOf(rep); shares["amd64"] != len(rep.Tasks) {
		t.Errorf("shares %v: want every task on amd64", shares)
	}
	why := strings.Join(rep.Warnings, "\n")
	for _, w := range want {
		if !strings.Contains(why, w) {
			t.Errorf("report warnings %q do not say %q", rep.Warnings, w)
		}
	}
}

// TestMixedPlatformsResourcesArch: resources.arch keeps a job off the
// other platform's peers, and the report says why.
func TestMixedPlatformsResourcesArch(t *testing.T) {
	dir := t.TempDir()
	peers := mixedSwarm(t, dir)
	spec := writeSpec(t, dir, "r.yaml", strings.Replace(execPerPlatform, "timeout: 1m", "timeout: 1m\nresources: {os: linux, arch: arm64}", 1))
	rep := runMixed(t, spec, filepath.Join(dir, "out"), peers)
	checkOnce(t, rep)
	if shares := sharesOf(rep); shares["arm64"] != len(rep.Tasks) {
		t.Errorf("shares %v: want every task on arm64", shares)
	}
	if why := strings.Join(rep.Warnings, "\n"); !strings.Contains(why, "peer amd64 (linux/amd64) gets no task: the job's resources.arch is arm64, this peer is amd64") {
		t.Errorf("report warnings %q do not say why amd64 got no task", rep.Warnings)
	}
}

// TestPluginMapBadInput: a per-platform map with an unknown platform, or
// without this machine's platform, or handed to the swarm, is bad input at
// its line and column.
func TestPluginMapBadInput(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	other := "plan9/arm"
	for _, c := range []struct {
		name, body, want string
		args             []string
	}{
		{"unknown", "plugin:\n  linux/amd64: ./x\n  linux/arm46: ./y\ntasks: [{}]\n",
			`unknown.yaml:3:3: plugin: unknown platform "linux/arm46"`, nil},
		{"nohost", "plugin: {" + other + ": ./x}\ntasks: [{}]\n",
			"nohost.yaml:1:9: plugin: the per-platform map (plan9/arm) has no entry for this machine's platform " + runtime.GOOS + "/" + runtime.GOARCH, nil},
		{"detach", "plugin: {" + runtime.GOOS + "/" + runtime.GOARCH + ": ./x}\ntasks: [{}]\n",
			fmt.Sprintf("detach.yaml:1:%d: plugin: --detach does not carry a per-platform plugin map", len("plugin: {"+runtime.GOOS+"/"+runtime.GOARCH+": ")+1), []string{"--detach"}},
	} {
		spec := writeSpec(t, dir, c.name+".yaml", c.body)
		args := []string{"run", spec, "--no-mdns"}
		if c.args == nil {
			args = append(args, "--out", filepath.Join(dir, c.name))
		}
		r := p2pc(t, append(args, c.args...)...)
		if r.code != exitBadInput || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, want %d with %q\n%s", c.name, r.code, exitBadInput, c.want, r.stderr+r.stdout)
		}
		if c.args == nil { // p2pc validate says the same
			if r := p2pc(t, "validate", spec); r.code != exitBadInput || !strings.Contains(r.stderr+r.stdout, c.want) {
				t.Errorf("validate %s: exit %d, want %d with %q\n%s", c.name, r.code, exitBadInput, c.want, r.stderr+r.stdout)
			}
		}
	}
}

// TestMixedPlatformsPluginMap: prebuilt executables, one per platform:
// each peer runs its own, and the image is a local run's.
func TestMixedPlatformsPluginMap(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	peers := mixedSwarm(t, dir)
	for _, arch := range []string{"amd64", "arm64"} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "bin", "mandelbrot-"+arch), ".")
		cmd.Dir = filepath.Join(repoRoot, "plugins", "mandelbrot")
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build the %s plugin: %v\n%s", arch, err, out)
		}
	}
	// Two replicas on distinct hosts: both peers run every band, however
	// slow the emulated one is, and their outputs must agree.
	body := strings.Replace(fmt.Sprintf(mandelbrotSpec, 16, 15), "plugin: {{repo}}/plugins/mandelbrot",
		"plugin: {linux/amd64: ./bin/mandelbrot-amd64, linux/arm64: ./bin/mandelbrot-arm64}", 1) + "verify: {replicas: 2}\n"
	spec := writeSpec(t, dir, "m.yaml", body)
	out := filepath.Join(dir, "out")
	rep := runMixed(t, spec, out, peers, "--min-peers", "2")
	for _, task := range rep.Tasks {
		ran := map[string]bool{}
		for _, a := range task.Attempts {
			if a.Outcome == report.OutcomeOK {
				ran[a.Peer] = true
			}
		}
		if task.State != report.TaskDone || !ran["amd64"] || !ran["arm64"] {
			t.Errorf("task %s: state %s, ok on %v; want done, ok on amd64 and arm64", task.ID, task.State, ran)
		}
	}
	checkLocalImage(t, spec, out, filepath.Join(dir, "local"))
}
