package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/p2pc/p2pc/harness"
)

var submitterGone = Scenario{
	Name: "submitter-gone",
	Doc: "A 90-task job is handed to three peers with `p2pc run --detach`. Once the submitter has exited, its " +
		"machine goes for good: its network namespace is deleted, with its link, and its data folder removed. A new " +
		"machine (a fresh namespace at another address, a fresh data folder: another node identity of the same " +
		"swarm) runs `p2pc attach JOB`: it must follow the job to its end and write an output folder with a clean " +
		"run's outputs, each task accepted once (job = from the detach to the attach's end; recover = the new " +
		"machine's attach, start to end).",
	run: runSubmitterGone,
}

// detachedRe is the line `p2pc run --detach` prints on stdout.
var detachedRe = regexp.MustCompile(`(?m)^job ([0-9a-f]{64}) owner (\S+)$`)

func runSubmitterGone(ctx context.Context, e *Env) (out *Outcome, err error) {
	r, err := e.start(ctx, setup{name: "gone", job: e.echoJob(90, 100, ""),
		peers: []harness.PeerSpec{{Name: "a", Slots: 1}, {Name: "b", Slots: 1}, {Name: "c", Slots: 1}}})
	if err != nil {
		return nil, err
	}
	defer r.finish(&err)
	out = &Outcome{}
	laptop := filepath.Join(r.dir, "laptop")
	join := strings.Join(r.lab.PeerAddrs(), ",")
	handed := time.Now()
	stdout, err := r.lab.RunP2PC(ctx, "--data", laptop, "run", r.spec, "--detach", "--min-peers", "3", "--no-mdns", "--join", join)
	if err != nil {
		return out, err
	}
	m := detachedRe.FindStringSubmatch(stdout)
	if m == nil {
		return out, fmt.Errorf("p2pc run --detach printed no job line:\n%s", stdout)
	}
	id, owner := m[1], m[2]
	if err := r.lab.NewSubmitter(ctx); err != nil {
		return out, err
	}
	if err := os.RemoveAll(laptop); err != nil {
		return out, fmt.Errorf("remove the submitter's data folder: %w", err)
	}
	out.note("owner %s", owner)
	attachCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	outDir := filepath.Join(r.dir, "attached")
	start := time.Now()
	_, err = r.lab.RunP2PC(attachCtx, "--data", filepath.Join(r.dir, "newcomer"), "attach", id[:12], "--out", outDir,
		"--no-progress", "--no-mdns", "--join", join)
	out.Recover, out.Wall = time.Since(start), time.Since(handed)
	if err != nil {
		return out, fmt.Errorf("attach from a new machine: %w", err)
	}
	rep, err := harness.ReadReport(outDir)
	if err != nil {
		return out, fmt.Errorf("attach from a new machine: %w", err)
	}
	out.Lost = lost(rep)
	if rep.JobID != id {
		return out, fmt.Errorf("attached report: job %s, want %s", rep.JobID, id)
	}
	return out, checkReport(rep, outDir, r.want, true)
}
