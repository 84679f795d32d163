package webui

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

func TestScanReport(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	const idA = "aaaa-bbbb-cccc-dddd-eeee-ffff-gggg"
	rep := &report.Report{Summary: report.Summary{Total: 6, Done: 2, Failed: 1}, Tasks: []report.Task{
		{ID: "t0", State: report.TaskDone, Peer: "a@" + idA, Attempts: []report.Attempt{{Peer: "a@" + idA, End: at(-5), Outcome: report.OutcomeOK}}},
		{ID: "t1", State: report.TaskDone, Peer: "a", PeerID: idA, Attempts: []report.Attempt{
			{Peer: "b", End: at(-50), Outcome: report.OutcomeLost, Error: "gone"},
			{Peer: "a", PeerID: idA, End: at(-40), Outcome: report.OutcomeOK}}},
		{ID: "t2", State: report.TaskFailed, Attempts: []report.Attempt{
			{Peer: "local", End: at(-3), Outcome: report.OutcomeCrashed, Error: strings.Repeat("x", 3000) + "stderr: boom"}}},
		{ID: "t3", State: report.TaskRunning, Attempts: []report.Attempt{{Peer: "local", End: at(-2), Outcome: report.OutcomeTaskError, Error: "retry me"}},
			Partials: []report.Partial{{Time: at(-9), Peer: "local", Text: "old"}, {Time: at(-1), Peer: "local", Text: "best 42"}}},
		{ID: "t4", State: report.TaskRunning, Partials: []report.Partial{{Time: at(-2), Peer: "b", Bytes: append(append([]byte(nil), pngMagic...), 0)}}},
		{ID: "t5", State: report.TaskPending},
	}}
	s := scanReport(rep, now)
	j := s.job
	if j.Done != 2 || j.Failed != 1 || j.Running != 2 || j.Queued != 1 || j.Total != 6 {
		t.Errorf("counts %+v", j)
	}
	if len(s.failures) != 2 || s.failures[0].Task != "t3" || s.failures[1].Task != "t2" || !s.failures[1].Final || s.failures[0].Final {
		t.Errorf("failures (newest first, lost attempts left out): %+v", s.failures)
	}
	if f := s.failures[1].Error; len(f) > errorTail+4 || !strings.HasSuffix(f, "stderr: boom") {
		t.Errorf("error tail %q", f)
	}
	if len(s.partials) != 2 || s.partials[0].Text != "best 42" || !strings.HasPrefix(s.partials[1].PNG, "data:image/png;base64,") {
		t.Errorf("partials %+v", s.partials)
	}
	if s.done[idA] != 2 || s.recent[idA] != 1 {
		t.Errorf("per peer: done %v recent %v", s.done, s.recent)
	}
}

func TestSeries(t *testing.T) {
	var s series
	t0 := time.Unix(1000, 0)
	for i := range 2000 {
		s.add(t0.Add(time.Duration(i)*time.Second), i*3)
	}
	if len(s.points) >= seriesPoints || s.step < 2*time.Second {
		t.Errorf("%d points, step %s: the series must thin out", len(s.points), s.step)
	}
	now := t0.Add(2000 * time.Second)
	if r := s.rate(now, 6000, 30*time.Second); r < 2.9 || r > 3.1 {
		t.Errorf("rate %.2f, want 3", r)
	}
	for _, c := range []struct {
		left int
		rate float64
		want float64
	}{{0, 0, 0}, {10, 0, -1}, {10, 2, 5}} {
		if got := eta(c.left, c.rate); got != c.want {
			t.Errorf("eta(%d, %g) = %g, want %g", c.left, c.rate, got, c.want)
		}
	}
}

func TestPageOf(t *testing.T) {
	job := newFakeJob(1000)
	for i := range job.rep.Tasks {
		if i%10 == 0 {
			job.rep.Tasks[i].State = report.TaskDone
		}
	}
	for _, c := range []struct {
		state         string
		offset, limit int
		total, rows   int
		first         string
	}{
		{"", 0, 50, 1000, 50, "000000"},
		{"", 990, 50, 1000, 10, "000990"},
		{report.TaskDone, 0, 5, 100, 5, "000000"},
		{report.TaskDone, 5, 5, 100, 5, "000050"},
		{report.TaskDone, 100, 5, 100, 0, ""},
		{report.TaskFailed, 0, 5, 0, 0, ""},
	} {
		pg := pageOf(job.rep, nil, c.state, c.offset, c.limit)
		first := ""
		if len(pg.Rows) > 0 {
			first = pg.Rows[0].ID
		}
		if pg.Total != c.total || len(pg.Rows) != c.rows || first != c.first {
			t.Errorf("pageOf(%q, %d, %d): total %d rows %d first %q", c.state, c.offset, c.limit, pg.Total, len(pg.Rows), first)
		}
	}
}

// A script polling /api/snapshot with no page open sees the job move: the
// snapshot is rebuilt when older than Every (it used to stay the first
// one forever).
func TestSnapshotWithoutPageIsFresh(t *testing.T) {
	job := newFakeJob(4)
	base, _ := serve(t, "127.0.0.1:0", Config{Job: job, Tokens: []string{testToken}, Every: 20 * time.Millisecond})
	done := func() int {
		resp, err := http.Get(base + "/api/snapshot")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var snap struct {
			Job struct {
				Done int `json:"done"`
			} `json:"job"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
			t.Fatal(err)
		}
		return snap.Job.Done
	}
	if got := done(); got != 0 {
		t.Fatalf("done %d before any task", got)
	}
	job.mu.Lock()
	job.rep.Tasks[0].State = report.TaskDone
	job.rep.Summary.Done = 1
	job.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for done() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the snapshot never showed the task done")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTaskPageRunningOn: a running task's row names the peers running
// it, the first copy first, then its replicas and backups.
func TestTaskPageRunningOn(t *testing.T) {
	const idB = "bbbb-bbbb-cccc-dddd-eeee-ffff-gggg"
	rep := &report.Report{Tasks: []report.Task{
		{ID: "t0", State: report.TaskRunning},
		{ID: "t1", State: report.TaskDone, Peer: "a"},
		{ID: "t2", State: report.TaskPending},
		{ID: "t3", State: report.TaskFailed, Attempts: []report.Attempt{{Peer: "a"}, {Peer: "b@" + idB, Outcome: report.OutcomeCrashed}}},
	}}
	running := map[string][]report.Attempt{"t0": {{Peer: "a"}, {Peer: "b@" + idB}}, "t1": {{Peer: "c"}}}
	pg := pageOf(rep, running, "", 0, 10)
	if r := pg.Rows[0]; r.Peer != "a" || strings.Join(r.On, ",") != "a,b" {
		t.Errorf("running task: peer %q on %v, want a on a,b", r.Peer, r.On)
	}
	if r := pg.Rows[1]; r.Peer != "a" || r.On != nil {
		t.Errorf("done task: peer %q on %v: a settled task runs nowhere", r.Peer, r.On)
	}
	if r := pg.Rows[3]; r.Peer != "b" {
		t.Errorf("failed task: peer %q, want b, where it last ran", r.Peer)
	}
}

func TestMeters(t *testing.T) {
	var m meters
	t0 := time.Unix(1000, 0)
	for i := range 100 { // 2 a second, for 50 s
		m.rate("k", t0.Add(time.Duration(i)*500*time.Millisecond), float64(i), RateWindow)
	}
	if r := m.rate("k", t0.Add(50*time.Second), 100, RateWindow); r < 1.9 || r > 2.1 {
		t.Errorf("rate %.2f, want 2", r)
	}
	// A counter that went down (its processes started again) starts over.
	if r := m.rate("k", t0.Add(51*time.Second), 3, RateWindow); r != 0 {
		t.Errorf("rate after a reset %.2f, want 0 until a second of history", r)
	}
	m.sweep(t0.Add(51*time.Second + RateWindow + time.Second))
	if len(m.hist) != 0 {
		t.Errorf("a key not sampled for a window is kept: %v", m.hist)
	}
}

// TestServedJobs: the view of a peer lists the jobs it serves, with the
// rate of their done tasks and the CPU their processes use.
func TestServedJobs(t *testing.T) {
	sv := &fakeServed{jobs: []ServedJob{{ID: "j1", Name: "render", Submitter: "alice", Serving: true, Running: 2, Done: 0, Memory: 10 << 20}}}
	h := newHub(Config{Served: sv, Swarm: fakeSwarm{{Name: "me", Self: true, Slots: 2}}, Every: time.Millisecond}, slog.Default())
	t0 := time.Unix(1000, 0)
	h.build(t0)
	sv.jobs[0].Done, sv.jobs[0].CPUTime = 10, 4*time.Second
	snap := h.build(t0.Add(2 * time.Second))
	js := snap["jobs"].([]ServedJob)
	if len(js) != 1 || js[0].Rate != 5 || js[0].CPU != 2 || js[0].Submitter != "alice" {
		t.Errorf("served jobs %+v, want rate 5/s and 2 cores busy", js)
	}
	if _, ok := snap["job"]; ok {
		t.Errorf("a peer's view has no job section")
	}
}

type fakeServed struct{ jobs []ServedJob }

func (f *fakeServed) Served() []ServedJob { return append([]ServedJob(nil), f.jobs...) }

// TestFlushEnds: the last snapshot says the end, so that a page stops
// listening (and offers nothing to act on) instead of reconnecting.
func TestFlushEnds(t *testing.T) {
	h := newHub(Config{Job: newFakeJob(3), Every: time.Millisecond, MaxStreams: 1}, slog.Default())
	c, _ := h.join()
	h.flushEvents(time.Now())
	if _, ok := c.take()["end"]; !ok {
		t.Errorf("the last snapshot has no end")
	}
}
