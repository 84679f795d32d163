package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/testwait"
)

var webViewRe = regexp.MustCompile(`web view: (http://\S+)`)

// artifactsDir is where browser tests put their screenshots: $P2PC_ARTIFACTS
// or TMPDIR/p2pc-artifacts-UID (kept after the test; one per user, since
// another user's is not writable).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("P2PC_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "p2pc-artifacts-"+strconv.Itoa(os.Getuid()))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts a headless Debian chromium of its own (own profile under
// the test's temp folder; --no-sandbox because tests run as root) and
// returns its context. Cleanup closes it and checks no process of it is
// left.
func browser(t *testing.T) context.Context {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("needs Debian's chromium (apt-get install chromium; .ci/run installs it)")
	}
	profile := filepath.Join(t.TempDir(), "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1400),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		cancel()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cctx, c := context.WithTimeout(ctx, 10*time.Second)
		defer c()
		if err := chromedp.Cancel(cctx); err != nil {
			t.Logf("close chromium: %v", err)
		}
		cancel()
		cancelAlloc()
		// Every process of this browser names its profile folder.
		deadline := time.Now().Add(5 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for left := procsWith(profile); len(left) > 0; left = procsWith(profile) {
			if time.Now().After(deadline) {
				t.Errorf("chromium processes %v still run 5s after the test closed the browser; killing them", left)
				for _, pid := range left {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				return
			}
			<-tick.C
		}
	})
	return ctx
}

// procsWith lists the live processes whose command line contains s.
func procsWith(s string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// screenshot saves what the window shows as NAME.png in the artifacts folder.
func screenshot(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()) // the window, 1280x1400
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(artifactsDir(t), name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// waitPage polls a JavaScript predicate in the page until it holds.
func waitPage(t *testing.T, ctx context.Context, what, expr string, timeout time.Duration) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout))); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("main").innerText`))
		screenshot(t, ctx, "failed-"+strings.ReplaceAll(t.Name(), "/", "-"))
		t.Fatalf("page: %s: not within %s: %v\npage text:\n%s", what, timeout, err, html)
	}
}

// TestWebViewInBrowser runs a job on three real peers with the web view
// on, opens it in chromium and checks what a person sees: the three
// peers, a partial result while the job runs, a killed peer turning lost
// within 3 s, the stderr tail of a crashing task, and the counts reaching
// the job's total.
func TestWebViewInBrowser(t *testing.T) {
	dir := t.TempDir()
	var peers []*peer
	for i := range 3 {
		peers = append(peers, startPeer(t, dir, fmt.Sprintf("peer-%d", i+1), 2))
	}
	spec := writeSpec(t, dir, "view.yaml", `
name: web-view-demo
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 1000, partials: 4}
retries: 0
tasks:
  - params: {crash: true}
  - range: {param: n, from: 1, to: 60}
`)
	out := filepath.Join(dir, "out")
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0",
		"--join", addrs(peers), "--no-progress", "--ui", "127.0.0.1:0"}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Kill()
	waitStderr(t, run, webViewRe)
	url := webViewRe.FindStringSubmatch(run.Stderr())[1]

	ctx := browser(t)
	if _, err := chromedp.Run(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the peer list shows 3 peers", `document.querySelectorAll("#peers tbody tr").length === 3`, 15*time.Second)
	waitPage(t, ctx, "a partial result while the job runs",
		`document.querySelector("#partials .partial") !== null && document.getElementById("job-state").textContent === "running"`, 15*time.Second)
	waitPage(t, ctx, "the chart draws", `document.querySelector("#chart path.line") !== null`, 10*time.Second)
	screenshot(t, ctx, "webui-running")

	victim := peers[1]
	victim.proc.Kill() // SIGKILL
	killed := time.Now()
	waitPage(t, ctx, "the killed peer is lost", `document.querySelector('#peers tr[data-name="`+victim.name+`"][data-state="lost"]') !== null`, 3*time.Second)
	t.Logf("killed peer shown lost after %s", time.Since(killed).Round(time.Millisecond))

	waitPage(t, ctx, "the crashing task's stderr tail", `document.getElementById("failures").innerText.includes("echo: crashing as asked")`, 30*time.Second)
	if err := chromedp.Do(ctx, chromedp.SetValue("#task-state", "failed"), chromedp.Evaluate[chromedp.Void](`document.getElementById("task-state").dispatchEvent(new Event("change"))`)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the failed filter lists the crashed task", `document.querySelectorAll("#tasks tbody tr[data-state=failed]").length === 1`, 5*time.Second)
	screenshot(t, ctx, "webui-lost-and-failed")
	waitPage(t, ctx, "half the job done while it runs",
		`+document.getElementById("count-done").textContent >= 30 && document.getElementById("job-state").textContent === "running"`, 60*time.Second)
	screenshot(t, ctx, "webui-midway") // the one docs/img/webui.png shows
	waitPage(t, ctx, "the counts reach the job's total",
		`(+document.getElementById("count-done").textContent) + (+document.getElementById("count-failed").textContent) === 61 && +document.getElementById("count-total").textContent === 61`, 60*time.Second)
	screenshot(t, ctx, "webui-done")

	code, err := run.Wait(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if code != exitTaskFailed {
		t.Fatalf("run: exit %d, want %d (one task crashes)\n%s", code, exitTaskFailed, run.Stderr())
	}
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("the web view still answers after the run ended")
	}
}

func TestExpandUIFlag(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"run --ui job.yaml", "run --ui=default job.yaml"},
		{"run job.yaml --ui", "run job.yaml --ui=default"},
		{"run --ui 0.0.0.0:80 job.yaml", "run --ui 0.0.0.0:80 job.yaml"},
		{"run --ui=127.0.0.1:1 job.yaml", "run --ui=127.0.0.1:1 job.yaml"},
		{"join --ui --slots 2", "join --ui=default --slots 2"},
		{"run -- --ui", "run -- --ui"},
	} {
		if got := strings.Join(expandUIFlag(strings.Fields(c.in)), " "); got != c.want {
			t.Errorf("expandUIFlag(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestJoinWebView: `p2pc join --ui` serves the peer's own view: itself
// with its slots and confinement, and no job.
func TestJoinWebView(t *testing.T) {
	dir := t.TempDir()
	other := startPeer(t, dir, "other", 1)
	p := startPeer(t, dir, "viewer", 3, "--ui", "127.0.0.1:0", "--join", other.addr)
	waitStderr(t, p.proc, webViewRe)
	url := webViewRe.FindStringSubmatch(p.proc.Stderr())[1]
	base := url[:strings.Index(url, "/?token=")]
	type peerView struct {
		Name        string `json:"name"`
		Slots       int    `json:"slots"`
		Self        bool   `json:"self"`
		Confinement string `json:"confinement"`
	}
	var snap struct {
		Job   json.RawMessage `json:"job"`
		Peers []peerView      `json:"peers"`
	}
	// The other peer appears once gossip has it, with the confinement it
	// gossips.
	testwait.For(t, 30*time.Second, "the other peer in the web view", func() bool {
		resp, err := http.Get(base + "/api/snapshot")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
			t.Fatal(err)
		}
		return len(snap.Peers) == 2
	})
	self, peer := snap.Peers[0], snap.Peers[1]
	if self.Name != "viewer" || !self.Self || self.Slots != 3 || self.Confinement == "" || snap.Job != nil {
		t.Fatalf("peer view: %+v (job %s)", snap.Peers, snap.Job)
	}
	if peer.Name != "other" || peer.Self || peer.Slots != 1 || peer.Confinement != self.Confinement {
		t.Errorf("the other peer: %+v, want its gossiped confinement %q", peer, self.Confinement)
	}
	if r, err := http.Get(base + "/api/tasks"); err != nil || r.StatusCode != http.StatusNotFound {
		t.Errorf("task table on a peer: %v %v", r.StatusCode, err)
	}
}

// snapshotPeer is a peer as /api/snapshot gives it.
type snapshotPeer struct {
	Name  string  `json:"name"`
	ID    string  `json:"id"`
	Slots int     `json:"slots"`
	Done  int     `json:"done"`
	Rate  float64 `json:"rate"`
	State string  `json:"state"`
	Note  string  `json:"note"`
	Self  bool    `json:"self"`
}

// viewSnapshot reads the web view's /api/snapshot at base.
func viewSnapshot(t *testing.T, base string) (peers []snapshotPeer, job json.RawMessage) {
	t.Helper()
	resp, err := http.Get(base + "/api/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var snap struct {
		Job   json.RawMessage `json:"job"`
		Peers []snapshotPeer  `json:"peers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	return snap.Peers, snap.Job
}

// viewBase is the address of the web view a process printed.
func viewBase(t *testing.T, p *harness.Proc) (url, base string) {
	t.Helper()
	waitStderr(t, p, webViewRe)
	url = webViewRe.FindStringSubmatch(p.Stderr())[1]
	return url, url[:strings.Index(url, "/?token=")]
}

// startRunOn starts `p2pc run spec` into dir/out on the peers at join
// (none of its own slots), with extra flags; the test's end kills it.
func startRunOn(t *testing.T, dir, spec, join string, extra ...string) *harness.Proc {
	t.Helper()
	args := append([]string{"--data", dataDir, "run", spec, "--out", filepath.Join(dir, "out"), "--no-mdns", "--local-slots", "0",
		"--join", join, "--no-progress"}, extra...)
	run, err := harness.Start(p2pcBin, args, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Kill)
	return run
}

var nodeIDRe = regexp.MustCompile(`listening \S+ name \S+ slots \d+ id (\S+)`)

// TestWebViewPeerRestarted: a peer killed in the middle of a job and
// started again on its data (same node ID) under another name, as a bare
// `p2pc join` does (its default name is HOST-PID), is one row of the
// swarm, live again with its new name, its done count going on, and the
// old session's error shown as past.
func TestWebViewPeerRestarted(t *testing.T) {
	dir := t.TempDir()
	steady := startPeer(t, dir, "steady", 1)
	flaky := startPeer(t, dir, "flaky", 1, "--join", steady.addr)
	flakyID := nodeIDRe.FindStringSubmatch(flaky.proc.Stdout())[1]
	spec := writeSpec(t, dir, "restart.yaml", `
name: web-view-restart
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 400}
tasks:
  - range: {param: n, from: 1, to: 400}
`)
	run := startRunOn(t, dir, spec, steady.addr+","+flaky.addr, "--ui", "127.0.0.1:0")
	_, base := viewBase(t, run)
	row := func(peers []snapshotPeer) (snapshotPeer, int) {
		var p snapshotPeer
		n := 0
		for _, x := range peers {
			if x.ID == flakyID {
				p, n = x, n+1
			}
		}
		return p, n
	}
	var before snapshotPeer
	testwait.For(t, 60*time.Second, "the flaky peer has done tasks", func() bool {
		peers, _ := viewSnapshot(t, base)
		before, _ = row(peers)
		return before.Done >= 2
	})
	flaky.proc.Kill() // SIGKILL: its session breaks
	testwait.For(t, 20*time.Second, "the killed peer shown lost", func() bool {
		peers, _ := viewSnapshot(t, base)
		p, _ := row(peers)
		before = p
		return p.State == "lost" && p.Note != ""
	})
	again, err := harness.Start(p2pcBin, []string{"--data", flaky.data, "join", "--listen", "127.0.0.1:0", "--name", "flaky-again", "--slots", "1", "--join", steady.addr},
		harness.Options{Name: "flaky-again"})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop(5 * time.Second)
	var now snapshotPeer
	var rows int
	testwait.For(t, 60*time.Second, "the restarted peer live again, its done count going on", func() bool {
		peers, _ := viewSnapshot(t, base)
		now, rows = row(peers)
		return now.State != "lost" && now.Done > before.Done
	})
	// One node, one worker: the job keeps the name the node first
	// enrolled under; the row shows it with the node's current name.
	if now.Name != "flaky" && now.Name != "flaky-again" {
		t.Errorf("restarted peer shown as %q, want flaky (its worker) or flaky-again", now.Name)
	}
	t.Logf("restarted peer: %+v", now)
	if rows != 1 {
		t.Errorf("the restarted node is %d rows of the swarm, want 1", rows)
	}
	if !strings.Contains(now.Note, "earlier session broke") {
		t.Errorf("restarted peer: note %q, want the old error shown as past", now.Note)
	}
	t.Logf("before the kill: %+v; after the restart: %+v", before, now)
	run.Stop(10 * time.Second) // the rest of the job is not this test's
}

// TestWebViewTasksAndEnd opens the web view of a job whose tasks run
// on two peers each (replicas) and checks what a person sees: the task
// table filled on the first paint, each running task with the peers
// running it, and, once the run ended, the final state with no
// "reconnecting" and no Cancel button.
func TestWebViewTasksAndEnd(t *testing.T) {
	dir := t.TempDir()
	// Replicas go to distinct hosts: each peer on its own loopback address.
	a := startPeerOnHost(t, dir, "peer-a", 2, 1)
	b := startPeerOnHost(t, dir, "peer-b", 3, 1)
	spec := writeSpec(t, dir, "replicas.yaml", `
name: web-view-replicas
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 1500}
verify: {replicas: 2}
tasks:
  - range: {param: n, from: 1, to: 8}
`)
	run := startRunOn(t, dir, spec, addrs([]*peer{a, b}), "--ui", "127.0.0.1:0")
	url, _ := viewBase(t, run)
	ctx := browser(t)
	// The first paint: the table is there before any event (the event
	// stream is blocked), then the page goes live as usual.
	block := func(patterns ...string) {
		t.Helper()
		var ps []*network.BlockPattern
		for _, p := range patterns {
			ps = append(ps, &network.BlockPattern{URLPattern: p, Block: true})
		}
		if _, err := chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: ps}); err != nil {
			t.Fatal(err)
		}
	}
	block("*://*:*/api/events*")
	if _, err := chromedp.Run(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the job and its task table on first load, without events",
		`document.getElementById("count-total").textContent === "8" && document.querySelectorAll("#tasks tbody tr").length === 8`, 10*time.Second)
	screenshot(t, ctx, "webui-first-paint")
	block()
	if _, err := chromedp.Run(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the page live", `document.getElementById("conn").textContent === "live"`, 10*time.Second)
	waitPage(t, ctx, "a running task with both its peers",
		`[...document.querySelectorAll("#tasks tbody tr[data-state=running] td.peer")].some((td) => td.textContent.includes("peer-a") && td.textContent.includes("peer-b"))`,
		30*time.Second)
	screenshot(t, ctx, "webui-running-peers")

	code, err := run.Wait(2 * time.Minute)
	if err != nil || code != 0 {
		t.Fatalf("run: exit %d, %v\n%s", code, err, run.Stderr())
	}
	waitPage(t, ctx, "the final state, no Cancel",
		`document.getElementById("job-state").textContent === "complete" && document.getElementById("conn").textContent === "ended: complete" && document.getElementById("cancel").hidden`,
		10*time.Second)
	// It stays so past the event stream's retry time (2 s): the page
	// stopped listening, it does not reconnect.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("conn").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		if conn != "ended: complete" {
			t.Fatalf("after the run ended the page says %q", conn)
		}
		time.Sleep(100 * time.Millisecond) // sampling the page, not waiting for a condition
	}
	waitPage(t, ctx, "every task done in the table", `document.querySelectorAll("#tasks tbody tr[data-state=done]").length === 8`, 5*time.Second)
	screenshot(t, ctx, "webui-ended")
}

// TestJoinWebViewServedJobs: `p2pc join --ui` shows the jobs the peer
// serves (job, submitter, running and done tasks, rate, CPU and memory
// of its tasks), and its own rate while it works.
func TestJoinWebViewServedJobs(t *testing.T) {
	dir := t.TempDir()
	p := startPeer(t, dir, "server", 2, "--ui", "127.0.0.1:0")
	url, base := viewBase(t, p.proc)
	spec := writeSpec(t, dir, "served.yaml", `
name: web-view-served
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 700}
tasks:
  - range: {param: n, from: 1, to: 30}
`)
	run := startRunOn(t, dir, spec, p.addr)
	ctx := browser(t)
	if _, err := chromedp.Run(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	row := `document.querySelector('#jobs tbody tr[data-state="serving"]')`
	cell := func(cls string) string { return row + `.querySelector("td.` + cls + `").textContent` }
	waitPage(t, ctx, "the served job with its submitter, running tasks and memory",
		row+` !== null && `+row+`.textContent.includes("web-view-served") && `+row+`.children[1].textContent.length > 1 && +`+cell("running")+` >= 1 && parseFloat(`+cell("mem")+`) > 0`,
		60*time.Second)
	waitPage(t, ctx, "done tasks and a rate while it works", `+`+cell("done")+` >= 4 && parseFloat(`+cell("rate")+`) > 0 && /^\d+%$/.test(`+cell("cpu")+`)`, 60*time.Second)
	peers, _ := viewSnapshot(t, base)
	if len(peers) == 0 || !peers[0].Self || peers[0].Rate <= 0 || peers[0].Done < 4 {
		t.Errorf("the peer itself while it works: %+v, want its rate and done count", peers)
	}
	screenshot(t, ctx, "webui-peer-serving")
	if code, err := run.Wait(2 * time.Minute); err != nil || code != 0 {
		t.Fatalf("run: exit %d, %v\n%s", code, err, run.Stderr())
	}
	waitPage(t, ctx, "the job ended with its 30 tasks done here",
		`(() => { const r = document.querySelector('#jobs tbody tr[data-state="ended"]'); return r !== null && r.querySelector("td.done").textContent === "30" && r.querySelector("td.running").textContent === "0"; })()`,
		30*time.Second)
	screenshot(t, ctx, "webui-peer-ended")
}
