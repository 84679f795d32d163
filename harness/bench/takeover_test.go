package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

func TestRanAgain(t *testing.T) {
	ran := func(task string) string {
		return `time=2026-11-28T13:00:00.000Z level=DEBUG msg="task ran" component=node task=` + task + " attempt=1 outcome=ok\n"
	}
	rep := &report.Report{Tasks: []report.Task{{ID: "a", Peer: "p1"}, {ID: "b", Peer: "p2"}, {ID: "c", Peer: "p3"}, {ID: "d", Peer: "p2"}, {ID: "e", Peer: "p1"}}}
	logs := map[string]string{
		// a: once. b: on the dead owner, whose result died with it, then
		// on p2 (right). c: on p2 and p3, finished work done again. d: on
		// p1 and p2, but a backup copy of a straggler. e: failed runs do
		// not count.
		"dead": ran("b"),
		"p1":   ran("a") + ran("d") + strings.Replace(ran("e"), "outcome=ok", "outcome=failed", 1),
		"p2":   ran("b") + ran("c") + ran("d") + `level=DEBUG msg="backup copy of a straggler" component=sched task=d peer=p2 attempt=2` + "\n",
		"p3":   ran("c"),
	}
	got := RanAgain(logs, rep, "dead")
	if got.Ran != 4 || got.Again != 1 || got.Lost != 1 || got.Backups != 1 || len(got.Examples) != 1 || !strings.Contains(got.Examples[0], "task c ran to its end on p2, p3") {
		t.Errorf("RanAgain = %+v, want 4 ran, c again, b lost with the dead, d a backup", got)
	}
	if got := RanAgain(logs, rep); got.Again != 2 {
		t.Errorf("without the dead member: %d ran again, want 2 (b and c)", got.Again)
	}
}

func TestFirstLeaseAfter(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	rep := &report.Report{Tasks: []report.Task{
		{Attempts: []report.Attempt{{Start: at(100)}, {Start: at(3000)}}},
		{Attempts: []report.Attempt{{Start: at(1500), HandedOver: true}}}, // held ahead by a peer
		{Attempts: []report.Attempt{{Start: at(2500)}}},
	}}
	if got := FirstLeaseAfter(rep, at(1000)); !got.Equal(at(2500)) {
		t.Errorf("first lease after 1 s: %v, want 2.5 s (a handed-over attempt is not a lease of the new owner)", got.Sub(t0))
	}
	if got := FirstLeaseAfter(rep, at(5000)); !got.IsZero() {
		t.Errorf("first lease after the last: %v, want none", got)
	}
}

func TestParseCopiesSent(t *testing.T) {
	log := `time=2026-11-28T13:00:00.000Z level=INFO msg="copies sent" component=swarmjobs job=aaaaaaaaaaaa epoch=1 tasks=1 bytes=1 state_bytes=1 state_holds=1 results_bytes=0 job_bytes=0 record_bytes=0
time=2026-11-28T13:00:01.000Z level=INFO msg="copies sent" component=swarmjobs job=0123456789ab epoch=2 tasks=512 bytes=45486206 state_bytes=5322720 state_holds=22 results_bytes=1612654 job_bytes=38550162 record_bytes=670
`
	got, ok := parseCopiesSent(log, "0123456789ab"+strings.Repeat("f", 52))
	want := copiesSent{Tasks: 512, Bytes: 45486206, StateBytes: 5322720, StateHolds: 22, ResultsBytes: 1612654, JobBytes: 38550162, RecordBytes: 670}
	if !ok || got != want {
		t.Errorf("parseCopiesSent = %+v, %v; want %+v", got, ok, want)
	}
	if _, ok := parseCopiesSent(log, strings.Repeat("b", 64)); ok {
		t.Error("a job without a line parsed")
	}
	if at := logLineAt(log, copiesSentRe); !at.Equal(time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC)) {
		t.Errorf("logLineAt = %v", at)
	}
}

// TestBenchTakeover runs the takeover suite in its quick size with two
// kills (real members in a lab, as root) and checks that every figure
// came out and is sane: each owner's kill was followed by a takeover at
// a higher epoch, no finished task ran again, the owner counted the
// copies it sent and the members' RSS was sampled.
func TestBenchTakeover(t *testing.T) {
	start := time.Now()
	out, b := quickBench(t, "takeover", 2*time.Minute, "--runs", "2")
	t.Logf("p2pc bench --quick --suite takeover --runs 2 took %s", time.Since(start).Round(time.Second))
	for _, f := range []string{"takeover.json", "rounds.csv", "summary.md", "rows.json", "job.yaml"} {
		if fi, err := os.Stat(filepath.Join(out, "takeover", f)); err != nil || fi.Size() == 0 {
			t.Errorf("takeover/%s: %v", f, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(out, "takeover", "takeover.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Rounds []takeoverRound `json:"rounds"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("takeover.json: %v", err)
	}
	if len(got.Rounds) != 2 {
		t.Fatalf("%d rounds, want 2 (--runs 2)", len(got.Rounds))
	}
	for _, r := range got.Rounds {
		k, c := r.Kill, r.Clean
		if r.Error != "" || k == nil || c == nil {
			t.Errorf("round %d: %s", r.Round, r.Error)
			continue
		}
		if k.Successor == k.Owner || k.Epoch < 2 || k.TakeoverS <= 0 || k.TakeoverS > 30 || k.CompleteS < k.TakeoverS || k.DoneAtKill <= 0 || k.DoneAtKill >= k.Total {
			t.Errorf("round %d: kill %+v", r.Round, k)
		}
		if k.Reruns.Again != 0 || k.AcceptedTwice != 0 || k.Reruns.Ran < int(k.Total) {
			t.Errorf("round %d: %+v ran again, %d tasks not accepted once (of %d)", r.Round, k.Reruns, k.AcceptedTwice, k.Total)
		}
		s := c.Sent
		if s.Tasks != 512 || s.StateHolds < 2 || s.StateBytes <= 0 || s.ResultsBytes <= 0 || s.JobBytes <= 0 || s.Bytes != s.StateBytes+s.ResultsBytes+s.JobBytes+s.RecordBytes {
			t.Errorf("round %d: copies sent %+v", r.Round, s)
		}
		if len(c.RSS) != 4 || len(c.Holders) != 2 || len(c.Others) != 1 || c.HeldOnDisk <= 0 {
			t.Errorf("round %d: clean job %+v", r.Round, c)
		}
		if len(c.Heap) == 0 {
			t.Errorf("round %d: no member's live heap was read (gctrace)", r.Round)
		}
		for name, h := range c.Heap {
			if h.Peak <= 0 || h.GCs < 0 {
				t.Errorf("round %d: member %s's live heap %+v", r.Round, name, h)
			}
		}
		for name, tr := range c.RSS {
			if tr.N < 2 || tr.Before <= 0 || tr.Peak < tr.Before {
				t.Errorf("round %d: member %s's RSS %+v", r.Round, name, tr)
			}
		}
	}
	sum, _ := os.ReadFile(filepath.Join(out, "takeover", "summary.md"))
	for _, want := range []string{"kill to first lease under the new owner", "| finished tasks run again (all kills) | 0 |", "per task while the job runs", "peak live heap of a holder", "RSS growth of a holder"} {
		if !strings.Contains(string(sum), want) {
			t.Errorf("summary.md does not say %q:\n%s", want, sum)
		}
	}
	if !strings.Contains(string(b), "takeover") {
		t.Errorf("p2pc bench printed no takeover row:\n%s", b)
	}
}

func TestHeapWindow(t *testing.T) {
	log := "gc 1 @0.1s 1%: 0.01+1+0.01 ms clock, 0.02+0/1/0+0.01 ms cpu, 16->17->9 MB, 17 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"time=2026-11-28T13:00:00.000Z level=INFO msg=\"plugin said gc 9 @1.0s 1%: 1->1->99 MB\"\n"
	from := len(log)
	log += "gc 2 @2.0s 1%: 0.01+1+0.01 ms clock, 0.02+0/1/0+0.01 ms cpu, 40->41->21 MB, 45 MB goal, 0 MB stacks, 0 MB globals, 2 P\n" +
		"gc 3 @3.0s 1%: 0.01+1+0.01 ms clock, 0.02+0/1/0+0.01 ms cpu, 80->80->12 MB, 84 MB goal, 0 MB stacks, 0 MB globals, 2 P\n"
	if h, ok := heapWindow(log, from); !ok || h != (heapTrace{Before: 9, Peak: 21, After: 12, GCs: 2}) {
		t.Errorf("heapWindow = %+v, %v", h, ok)
	}
	if h, ok := heapWindow(log[:from], from); !ok || h != (heapTrace{Before: 9, Peak: 9, After: 9}) {
		t.Errorf("no collection in the window: %+v, %v; want the last before", h, ok)
	}
	if _, ok := heapWindow("no gc here\n", 3); ok {
		t.Error("a log without collections read")
	}
}
