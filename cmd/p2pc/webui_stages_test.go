package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/p2pc/p2pc/harness"
)

// TestWebViewStages opens the web view of a job with stages in chromium
// while its first task is held back (it waits for a file the test
// writes): the page shows a line per stage, in the graph's order, the
// streamed stages' counts moving on before the first stage is over
// (square 5 done, double 5, pairs 2, total waiting), the tasks of all
// stages as one job's; then the job ends with every count at its total.
func TestWebViewStages(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "go-on")
	hold := fmt.Sprintf("test $P2PC_PARAM_I != 1 || for k in $(seq 1200); do test -f %s && break; sleep 0.05; done", flag)
	spec := writeSpec(t, dir, "s.yaml", pipeSpec("staged-view", 6, hold))
	out := filepath.Join(dir, "out")
	run, err := harness.Start(p2pcBin, []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "2",
		"--no-progress", "--ui", "127.0.0.1:0"}, harness.Options{Name: "run"})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Kill()
	url, _ := viewBase(t, run)
	ctx := browser(t)
	if _, err := chromedp.Run(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	row := func(stage, col string) string {
		return fmt.Sprintf(`document.querySelector('#stages tr[data-stage="%s"] td.%s').textContent`, stage, col)
	}
	waitPage(t, ctx, "a line per stage, in order",
		`Array.from(document.querySelectorAll("#stages tbody tr")).map(r => r.dataset.stage).join(",") === "square,double,pairs,total"`, 15*time.Second)
	waitPage(t, ctx, "the streamed stages move on while square 0000 is held",
		row("square", "done")+` === "5" && `+row("double", "done")+` === "5" && `+row("pairs", "done")+` === "2" && `+
			`document.querySelector('#stages tr[data-stage="total"]').dataset.state === "waiting" && `+
			`document.querySelector('#stages tr[data-stage="square"]').dataset.state === "running" && `+
			row("double", "needs")+` === "square (each)" && `+row("total", "total")+` === "1"`, 60*time.Second)
	waitPage(t, ctx, "the job's counts are every stage's", `+document.getElementById("count-total").textContent === 16 && +document.getElementById("count-done").textContent === 12`, 10*time.Second)
	waitPage(t, ctx, "the task list names tasks by stage", `document.getElementById("tasks").innerText.includes("double/0001")`, 10*time.Second)
	screenshot(t, ctx, "webui-stages")
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, err := run.Wait(time.Minute)
	if err != nil || code != 0 {
		t.Fatalf("run: exit %d, %v\n%s", code, err, run.Stderr())
	}
	checkPipe(t, out, 6)
}
