package benchmarks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// BenchmarkResumeAfterKill (issue 15): a job of P2PC_BENCH_RESUME_TASKS
// echo tasks (default 100,000; P2PC_BENCH_RESUME_SLEEP_MS each, default 0)
// runs on 3 peers of 2 slots; `p2pc run` is SIGKILLed once job.db says
// half of them are done, and the same command runs again to the end.
// Each iteration is a fresh swarm and output folder; the peers keep
// results for P2PC_BENCH_RESUME_KEEP (their --keep-results, default 10m;
// 0 shows what a resume costs without the hand-over). It reports:
//
//   - first-new-ms: from the rerun's start to the first lease it issued
//     (the earliest attempt that starts after the rerun started: attempts
//     handed over by peers keep their real, earlier start);
//
//   - twice: tasks the peers ran to completion more than once (each peer
//     logs every task it ran, --log-level debug);
//
//   - handed-over: attempts job.db marks as handed over (handed_over:
//     peers finished them while the submitter was dead, or sent them
//     before it died and it had not acknowledged them);
//
//   - done-at-kill: tasks job.db had as done when the rerun started.
//
//     go test ./benchmarks -run '^$' -bench ResumeAfterKill -benchtime 3x -timeout 1h
func BenchmarkResumeAfterKill(b *testing.B) {
	heavy(b)
	bin, echo := binaries(b)
	tasks := envInt(b, "P2PC_BENCH_RESUME_TASKS", 100000)
	sleep := envInt(b, "P2PC_BENCH_RESUME_SLEEP_MS", 0)
	keep := os.Getenv("P2PC_BENCH_RESUME_KEEP")
	if keep == "" {
		keep = "10m"
	}
	var firstNew, twice, handed, doneAtKill []float64
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		peers, addrs := debugSwarm(b, bin, dir, 3, 2, keep)
		spec := echoSpec(b, echo, tasks, sleep)
		out := filepath.Join(dir, "out")
		args := []string{"--data", filepath.Join(dir, "submitter"), "run", spec, "--out", out, "--local-slots", "0",
			"--no-progress", "--no-mdns", "--listen", "127.0.0.1:0", "--join", strings.Join(addrs, ",")}
		first, err := harness.Start(bin, args, harness.Options{Name: "p2pc run"})
		if err != nil {
			b.Fatal(err)
		}
		waitDone(b, first, out, tasks/2)
		first.Kill()
		if _, err := first.Wait(time.Minute); err != nil {
			b.Fatal(err)
		}
		doneIDs := doneTasks(b, out)
		b.StartTimer()
		start := time.Now()
		again, err := harness.Start(bin, args, harness.Options{Name: "p2pc run (resumed)"})
		if err != nil {
			b.Fatal(err)
		}
		code, err := again.Wait(time.Hour)
		b.StopTimer()
		if err != nil || code != 0 {
			b.Fatalf("resumed run: exit %d, %v\n%s", code, err, again.Stderr())
		}
		rep, err := report.Read(out)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Summary.Done != tasks {
			b.Fatalf("%d of %d tasks done", rep.Summary.Done, tasks)
		}
		var news []time.Time
		h := 0
		for _, t := range rep.Tasks {
			for _, a := range t.Attempts {
				if a.HandedOver {
					h++
				} else if !a.Start.Before(start) {
					news = append(news, a.Start)
				}
			}
		}
		if len(news) == 0 {
			b.Fatal("the resumed run dispatched nothing")
		}
		firstNew = append(firstNew, ms(slices.MinFunc(news, time.Time.Compare).Sub(start)))
		twice = append(twice, float64(ranTwice(peers)))
		handed = append(handed, float64(h))
		doneAtKill = append(doneAtKill, float64(len(doneIDs)))
	}
	b.ReportMetric(median(firstNew), "first-new-ms")
	b.ReportMetric(median(twice), "twice")
	b.ReportMetric(median(handed), "handed-over")
	b.ReportMetric(median(doneAtKill), "done-at-kill")
}

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("%s=%q: want a whole number", name, v)
	}
	return n
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// debugSwarm starts peers `p2pc join` processes of slots slots that log
// every task they run (--log-level debug) and keep results for keep, for
// this iteration only.
func debugSwarm(b *testing.B, bin, dir string, peers, slots int, keep string) ([]*harness.Proc, []string) {
	b.Helper()
	var procs []*harness.Proc
	for i := range peers {
		name := fmt.Sprintf("peer%02d", i+1)
		p, err := harness.Start(bin, []string{"--data", filepath.Join(dir, name), "--log-level", "debug", "join", "--name", name,
			"--slots", strconv.Itoa(slots), "--listen", "127.0.0.1:0", "--no-mdns", "--keep-results", keep},
			harness.Options{Name: name, Env: []string{"TMPDIR=" + dir}})
		if err != nil {
			b.Fatal(err)
		}
		procs = append(procs, p)
	}
	b.Cleanup(func() {
		for _, p := range procs {
			p.Stop(2 * time.Second)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var addrs []string
	for _, p := range procs {
		m, err := p.WaitOutput(ctx, listenRe)
		if err != nil {
			b.Fatal(err)
		}
		addrs = append(addrs, m[1])
	}
	return procs, addrs
}

// waitDone waits until out's job database has at least n tasks done.
func waitDone(b *testing.B, run *harness.Proc, out string, n int) {
	b.Helper()
	deadline := time.Now().Add(time.Hour)
	for countDone(b, out) < n {
		select {
		case <-run.Done():
			b.Fatalf("the run ended before %d tasks were done\n%s", n, run.Stderr())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d tasks not done within an hour", n)
		}
	}
}

// countDone counts the tasks done in out's job database (0 before it
// exists).
func countDone(b *testing.B, out string) int {
	b.Helper()
	db, err := jobdb.OpenReadOnly(context.Background(), filepath.Join(out, jobdb.FileName))
	if err != nil {
		return 0
	}
	defer db.Close()
	var n int
	if err := db.SQL().QueryRow("SELECT count(*) FROM tasks WHERE state = 'done'").Scan(&n); err != nil {
		return 0
	}
	return n
}

// doneTasks are the IDs of the tasks done in out's job database.
func doneTasks(b *testing.B, out string) map[string]bool {
	b.Helper()
	db, err := jobdb.OpenReadOnly(context.Background(), filepath.Join(out, jobdb.FileName))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	rows, err := db.SQL().Query("SELECT id FROM tasks WHERE state = 'done'")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			b.Fatal(err)
		}
		ids[id] = true
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return ids
}

var ranRe = regexp.MustCompile(`msg="task ran" .*task=(\S+) .*outcome=ok`)

// ranTwice counts the tasks the peers logged as run to completion more
// than once.
func ranTwice(peers []*harness.Proc) int {
	ran := map[string]int{}
	for _, p := range peers {
		for _, m := range ranRe.FindAllStringSubmatch(p.Stderr(), -1) {
			ran[m[1]]++
		}
	}
	n := 0
	for _, c := range ran {
		if c > 1 {
			n++
		}
	}
	return n
}
