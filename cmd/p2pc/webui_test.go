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

	"github.com/chromedp/chromedp"
	"github.com/p2pc/p2pc/harness"
)

var webViewRe = regexp.MustCompile(`web view: (http://\S+)`)

// artifactsDir is where browser tests put their screenshots: $P2PC_ARTIFACTS
// or TMPDIR/p2pc-artifacts (kept after the test).
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("P2PC_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "p2pc-artifacts")
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
	waitFor(t, 30*time.Second, "the other peer in the web view", func() bool {
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
