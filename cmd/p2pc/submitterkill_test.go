package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// TestSubmitterKilled SIGKILLs `p2pc run` at random moments, 20 times in a
// row, on a swarm of 3 peers, and runs the same command again each time:
// a task whose result reached the job database never runs again (its
// record, accepted attempt and all, stays as it was), and the final
// outputs are byte-identical to those of a run that was never killed.
// Peers keep what they finished while the submitter was dead (and what
// they sent just before it died) and hand it over to the next run: no
// task runs to completion twice on the peers (they log every task they
// ran), and every task has exactly one successful attempt in job.db. A
// run that ends tells the peers so (End): they log that the job is over
// and keep nothing, never that the session was lost.
func TestSubmitterKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("slow (about 30s); TestStatus covers a SIGKILLed run and its resume in -short")
	}
	const kills, tasks = 20, 2000
	dir := t.TempDir()
	var peers []*peer
	for _, name := range []string{"s1", "s2", "s3"} {
		peers = append(peers, startPeer(t, dir, name, 2, "--log-level", "debug"))
	}
	spec := writeSpec(t, dir, "k.yaml", fmt.Sprintf(`
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 20}
tasks:
  - range: {param: n, from: 1, to: %d}
`, tasks))
	args := func(out string) []string {
		// At debug level a run logs the backup copies it leases.
		// --no-replicate: the run resumes its own output folder (with
		// replication the swarm would finish the job: selfrun_test.go).
		return []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addrs(peers), "--no-progress", "--log-level", "debug", "--no-replicate"}
	}
	start := time.Now()
	ref := filepath.Join(dir, "ref")
	if r := p2pc(t, args(ref)[2:]...); r.code != 0 {
		t.Fatalf("undisturbed run: exit %d\n%s", r.code, r.stderr)
	}
	refTook := time.Since(start)
	// What the peers logged of the undisturbed run (the same job).
	logged := make([]int, len(peers))
	for i, p := range peers {
		logged[i] = len(p.proc.Stderr())
	}
	checkJobOver(t, peers, make([]int, len(peers)), "the undisturbed run")

	out := filepath.Join(dir, "out")
	seed := uint64(time.Now().UnixNano())
	rnd := rand.New(rand.NewPCG(seed, 1))
	// settled: the record of every task seen done after a kill; backups:
	// the tasks a run leased a backup copy of.
	settled := map[string]string{}
	backups := map[string]bool{}
	ended := false
	// runLogs: each run's log; runStarts: the peers' log offsets at each
	// run's start (twiceWhy tells from them what went wrong).
	var runLogs []string
	var runStarts [][]int
	before := make([]int, len(peers)) // the peers' logs before the last run
	for k := range kills {
		for i, p := range peers {
			before[i] = len(p.proc.Stderr())
		}
		runStarts = append(runStarts, slices.Clone(before))
		run, err := harness.Start(p2pcBin, args(out), harness.Options{Name: fmt.Sprintf("run%d", k)})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-run.Done():
			// Peers work on while the submitter is dead, so on a loaded
			// machine the job may end a kill or two early: enough kills
			// are half of them.
			if k < kills/2 {
				t.Fatalf("the job ended after %d of %d kills (seed %d): it is too short to be killed enough\n%s", k, kills, seed, run.Stderr())
			}
			t.Logf("the job ended after %d of %d kills (seed %d)", k, kills, seed)
			runLogs = append(runLogs, run.Stderr())
			noteBackups(backups, run.Stderr())
			ended = true
		case <-time.After(killAfter(rnd, refTook, kills)):
		}
		if ended {
			break
		}
		run.Kill()
		if _, err := run.Wait(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		runLogs = append(runLogs, run.Stderr())
		noteBackups(backups, run.Stderr())
		checkSettled(t, out, settled, fmt.Sprintf("after kill %d (seed %d)", k+1, seed))
	}
	killed := len(settled)
	if !ended {
		for i, p := range peers {
			before[i] = len(p.proc.Stderr())
		}
		runStarts = append(runStarts, slices.Clone(before))
		r := p2pc(t, args(out)[2:]...)
		runLogs = append(runLogs, r.stderr)
		if r.code != 0 {
			t.Fatalf("the run after %d kills: exit %d\n%s", kills, r.code, r.stderr)
		}
		noteBackups(backups, r.stderr)
	}
	checkJobOver(t, peers, before, "the last run")
	checkSettled(t, out, settled, "at the end")
	rep := readReport(t, out)
	if rep.State != report.StateComplete || rep.Summary.Done != tasks {
		t.Fatalf("after the kills: state %s, %d done", rep.State, rep.Summary.Done)
	}
	handed := 0
	for _, task := range rep.Tasks {
		ok := 0
		for _, a := range task.Attempts {
			if a.Outcome == report.OutcomeOK {
				ok++
			}
			if a.HandedOver {
				handed++
			}
		}
		if ok != 1 {
			t.Errorf("task %s has %d successful attempts in the job database, want 1: %+v", task.ID, ok, task.Attempts)
		}
	}
	ran, offered := map[string]int{}, 0
	for i, p := range peers {
		for _, line := range strings.Split(p.proc.Stderr()[logged[i]:], "\n") {
			if strings.Contains(line, "offered to its coordinator") {
				offered++
			}
			if m := ranRe.FindStringSubmatch(line); m != nil {
				ran[m[1]]++
			}
		}
	}
	twice := 0
	for id, n := range ran {
		if n > 1 && !backups[id] { // a backup copy runs twice on purpose
			twice++
			t.Errorf("task %s ran to completion %d times on the peers:\n%s", id, n, twiceWhy(id, peers, runStarts, runLogs))
		}
	}
	if len(ran) != tasks || offered == 0 {
		t.Errorf("the peers ran %d distinct tasks of %d; %d sessions were offered results of earlier ones (want some)", len(ran), tasks, offered)
	}
	want := p2pc(t, "export", ref, "--format", "jsonl")
	got := p2pc(t, "export", out, "--format", "jsonl")
	if want.code != 0 || got.code != 0 || want.stdout != got.stdout || len(got.stdout) == 0 {
		t.Fatalf("outputs differ from the undisturbed run's (exit %d, %d; %d and %d bytes)", want.code, got.code, len(want.stdout), len(got.stdout))
	}
	t.Logf("%d kills; %d tasks had reached the database before the last kill and none ran again; %d sessions were offered results of earlier ones, %d results were handed over, %d tasks ran twice, %d backup copies; undisturbed run %s, all %s (seed %d)",
		kills, killed, offered, handed, twice, len(backups), refTook.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), seed)
}

// checkJobOver: each peer logged, after offset, that the job is over (the
// coordinator said so at the run's end), and never that its session was
// lost (results kept for a rerun that will not come). The peer logs it
// before it closes the session, which `p2pc run` waits for before it
// exits: only the log pipe may lag, for at most 5 s here.
func checkJobOver(t *testing.T, peers []*peer, offset []int, what string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for i, p := range peers {
		for !strings.Contains(p.proc.Stderr()[offset[i]:], "job over: the coordinator ended it") {
			select {
			case <-tick.C:
				continue
			case <-deadline:
			}
			break
		}
		if log := p.proc.Stderr()[offset[i]:]; !strings.Contains(log, "job over: the coordinator ended it") || strings.Contains(log, "session lost") {
			t.Errorf("%s: peer %d did not learn that the job is over (End), or kept results:\n%s", what, i+1, lastLines(log, 10))
		}
	}
}

// twiceWhy tells why task id ran to completion more than once: on which
// peer and during which run (its log from starts[k]) each completion was
// logged, what the hand-over gate of each run from the first of them on
// waited for, and who enrolled with how many results to hand over, in
// the order they enrolled. A peer that held a result of the task but was
// not on the list a later run read (a gate of too few peers, or none)
// lets that run lease the task to a peer that enrolled first.
func twiceWhy(id string, peers []*peer, starts [][]int, logs []string) string {
	var b strings.Builder
	first := len(logs)
	for i, p := range peers {
		log := p.proc.Stderr()
		for k := range starts {
			end := len(log)
			if k+1 < len(starts) {
				end = starts[k+1][i]
			}
			for _, m := range ranRe.FindAllStringSubmatch(log[starts[k][i]:end], -1) {
				if m[1] == id {
					fmt.Fprintf(&b, "  ran on %s during run %d\n", p.name, k)
					first = min(first, k)
				}
			}
		}
	}
	for k := first + 1; k < len(logs); k++ {
		gate := "no hand-over gate (job.db held no session list, or no job: a new run)"
		if m := gateRe.FindStringSubmatch(logs[k]); m != nil {
			gate = "its gate waited for " + m[1]
		}
		var enrolled []string
		for _, m := range enrolledRe.FindAllStringSubmatch(logs[k], -1) {
			enrolled = append(enrolled, m[1]+" ("+m[2]+" to hand over)")
		}
		fmt.Fprintf(&b, "  run %d: %s; enrolled %s\n", k, gate, strings.Join(enrolled, ", "))
		for _, line := range strings.Split(logs[k], "\n") {
			if strings.Contains(line, "did not hand over in time") {
				fmt.Fprintf(&b, "  run %d: %s\n", k, line)
			}
		}
	}
	return b.String()
}

var (
	// gateRe matches a resumed run's log line of its hand-over gate, with
	// the peers it waits for (at debug level).
	gateRe = regexp.MustCompile(`msg="resumed run: the last run's peers" .*list=(\S+)`)
	// enrolledRe matches a run's log line of a peer it enrolled.
	enrolledRe = regexp.MustCompile(`msg="peer enrolled" .*peer=(\S+) .*handovers=(\d+)`)
)

// ranRe matches a peer's log line of a task it ran to completion.
var ranRe = regexp.MustCompile(`msg="task ran" .*task=(\S+) .*outcome=ok`)

// checkSettled reads the job database in out and fails if a task seen done
// before is not done, or its record changed (it ran again); it adds the
// tasks done now.
func checkSettled(t *testing.T, out string, settled map[string]string, when string) {
	t.Helper()
	rep, err := jobdb.ReadReport(context.Background(), out)
	if errors.Is(err, fs.ErrNotExist) && len(settled) == 0 {
		return // killed before the job reached its database
	}
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	for _, task := range rep.Tasks {
		sig := ""
		if task.State == report.TaskDone {
			sig = fmt.Sprintf("%s %s %v", task.Digest, task.Peer, task.Attempts)
		}
		if was, ok := settled[task.ID]; ok && was != sig {
			t.Fatalf("%s: task %s had reached the database as done, and then changed (it ran again):\nwas %s\nnow %s", when, task.ID, was, sig)
		}
		if sig != "" {
			settled[task.ID] = sig
		}
	}
}

// killAfter is how long a run of the kill test lives: a random moment
// from its start (the spec read, the peers enrolled, tasks under way) to
// about 1/22 of the undisturbed run, so that the kills together take
// less than the job and every kill finds it unfinished, however fast
// this machine runs it (each run also spends its own start).
func killAfter(rnd *rand.Rand, ref time.Duration, kills int) time.Duration {
	most := max(ref/time.Duration(kills+2), 100*time.Millisecond)
	return 20*time.Millisecond + time.Duration(rnd.Int64N(int64(most)))
}

// TestSubmitterKilledMidTask: the submitter dies while every slot runs a
// task of 400 ms, and is started again at once. The peers run those tasks
// on; the new run's sessions must not lease them to anyone meanwhile: a
// peer's new session of the job names them in Welcome (running), the new
// run holds each for its peer, and the peer hands each over as it ends,
// however long that takes on a busy machine. Before, they were leased
// again at once and ran twice (TestSubmitterKilled caught it now and
// then: its tasks take 20 ms); then a peer waited at most 1.5 s for them,
// which a busy machine outlasted.
func TestSubmitterKilledMidTask(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("slow (about 10s)")
	}
	const tasks = 24
	dir := t.TempDir()
	var peers []*peer
	for _, name := range []string{"m1", "m2", "m3"} {
		peers = append(peers, startPeer(t, dir, name, 2, "--log-level", "debug"))
	}
	spec := writeSpec(t, dir, "m.yaml", fmt.Sprintf(`
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 400}
batch: off
tasks:
  - range: {param: n, from: 1, to: %d}
`, tasks))
	out := filepath.Join(dir, "out")
	args := []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addrs(peers), "--no-progress", "--no-replicate"}
	run, err := harness.Start(p2pcBin, args, harness.Options{Name: "run0"})
	if err != nil {
		t.Fatal(err)
	}
	// Killed once the first tasks are done and the next ones under way:
	// 200 ms into the second round of tasks.
	started := regexp.MustCompile(`msg="task ran" `)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := 0
		for _, p := range peers {
			n += len(started.FindAllString(p.proc.Stderr(), -1))
		}
		if n >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no task ran within 30 s\n%s", run.Stderr())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	run.Kill()
	if _, err := run.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	// At debug level the run logs the backup copies it leases.
	r := p2pc(t, append(args[2:], "--log-level", "debug")...)
	backups := map[string]bool{}
	noteBackups(backups, r.stderr)
	if r.code != 0 {
		t.Fatalf("the run after the kill: exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	if rep.State != report.StateComplete || rep.Summary.Done != tasks {
		t.Fatalf("after the kill: state %s, %d done", rep.State, rep.Summary.Done)
	}
	ran, handed := map[string]int{}, 0
	for _, p := range peers {
		for _, m := range ranRe.FindAllStringSubmatch(p.proc.Stderr(), -1) {
			ran[m[1]]++
		}
	}
	for _, task := range rep.Tasks {
		for _, a := range task.Attempts {
			if a.HandedOver {
				handed++
			}
		}
	}
	// Nothing runs twice but a backup copy (noteBackups).
	for id, n := range ran {
		if n > 1 && !backups[id] {
			t.Errorf("task %s ran to completion %d times on the peers", id, n)
		}
	}
	if handed == 0 {
		t.Errorf("no result was handed over: the kill found no task running, or the new run took the running ones from their peers")
	}
	t.Logf("%d tasks ran, %d results handed over, %d backup copies", len(ran), handed, len(backups))
}

// TestSubmitterKilledAtFirstEnrolment SIGKILLs `p2pc run` as soon as
// job.db lists its peers' sessions (a peer may get its first lease from
// then on), three times in fresh output folders, and runs it again each
// time. The killed run's job.db must hold the job and the run's name with
// the list: a rerun that finds no job there starts a new run, with no
// hand-over gate and another name, so the peers' results of the first
// tasks, kept for the killed run, are never handed over and those tasks
// run twice (TestSubmitterKilled caught it about 3 runs in 16 once the
// peers answered sooner). The rerun resumes the killed run, and no task
// runs to completion twice on the peers.
func TestSubmitterKilledAtFirstEnrolment(t *testing.T) {
	parallel(t)
	if testing.Short() {
		t.Skip("slow (about 15s)")
	}
	dir := t.TempDir()
	var peers []*peer
	for _, name := range []string{"f1", "f2", "f3"} {
		peers = append(peers, startPeer(t, dir, name, 2))
	}
	spec := writeSpec(t, dir, "f.yaml", `
plugin: {{repo}}/plugins/echo
params: {sleep_ms: 20}
tasks:
  - range: {param: n, from: 1, to: 60}
`)
	ctx := context.Background()
	for k := range 3 {
		from := make([]int, len(peers))
		for i, p := range peers {
			from[i] = len(p.proc.Stderr())
		}
		out := filepath.Join(dir, fmt.Sprint("out", k))
		args := []string{"--data", dataDir, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", addrs(peers), "--no-progress", "--no-replicate", "--log-level", "debug"}
		run, err := harness.Start(p2pcBin, args, harness.Options{Name: fmt.Sprint("run", k)})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(out, jobdb.FileName)
		listed := func() bool {
			db, err := jobdb.OpenReadOnly(ctx, path)
			if err != nil {
				return false
			}
			defer db.Close()
			v, err := db.JobValue(ctx, jobdb.SessionsKey)
			return err == nil && v != ""
		}
		// Polled every millisecond, not with testwait's backoff: the kill
		// must land before the run's first journal pass commits.
		deadline := time.Now().Add(30 * time.Second)
		for !listed() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: job.db listed no peer's session within 30 s\n%s", k, run.Stderr())
			}
			time.Sleep(time.Millisecond)
		}
		run.Kill()
		if _, err := run.Wait(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		db, err := jobdb.OpenReadOnly(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		killed, err := db.LoadJob(ctx)
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		if killed.JobID == "" || killed.Run == "" {
			t.Fatalf("round %d: the killed run's job.db lists its peers' sessions but holds no job (job %q, run %q): a rerun would start a new run", k, killed.JobID, killed.Run)
		}
		r := p2pc(t, args[2:]...)
		if r.code != 0 {
			t.Fatalf("round %d: the rerun: exit %d\n%s", k, r.code, r.stderr)
		}
		if rep := readReport(t, out); rep.Run != killed.Run || rep.State != report.StateComplete {
			t.Fatalf("round %d: the rerun is run %s (%s), want the killed run %s resumed", k, rep.Run, rep.State, killed.Run)
		}
		backups := map[string]bool{}
		noteBackups(backups, run.Stderr())
		noteBackups(backups, r.stderr)
		ran := map[string]int{}
		for i, p := range peers {
			for _, m := range ranRe.FindAllStringSubmatch(p.proc.Stderr()[from[i]:], -1) {
				ran[m[1]]++
			}
		}
		for id, n := range ran {
			if n > 1 && !backups[id] {
				t.Errorf("round %d: task %s ran to completion %d times on the peers", k, id, n)
			}
		}
	}
}

// backupRe matches the coordinator's log line of a backup copy it leased.
var backupRe = regexp.MustCompile(`msg="backup copy of a straggler" .*task=(\S+)`)

// noteBackups adds the tasks a run (its log) leased backup copies of: near
// a job's end an idle peer runs a copy of the slowest task (README), and
// on a busy machine the copy that lost may finish before its cancel
// arrives. Such a task runs twice on purpose, not for want of a hand-over.
func noteBackups(backups map[string]bool, log string) {
	for _, m := range backupRe.FindAllStringSubmatch(log, -1) {
		backups[m[1]] = true
	}
}
