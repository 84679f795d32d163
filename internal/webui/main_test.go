package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/report"
)

// The tests run in a private network namespace, where they may give an
// interface a non-loopback address (the access rule's other side).
func TestMain(m *testing.M) { os.Exit(harness.MainInNetns(m)) }

// fakeJob is a report under a lock, as the coordinator keeps it.
type fakeJob struct {
	mu  sync.Mutex
	rep *report.Report
}

func (f *fakeJob) EachTask(head func(*report.Report), task func(*report.Task)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := *f.rep
	h.Tasks = nil
	head(&h)
	for i := range f.rep.Tasks {
		task(&f.rep.Tasks[i])
	}
	return true
}

func (f *fakeJob) ReadJob(fn func(*report.Report)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	head := *f.rep
	head.Tasks = nil
	fn(&head)
	return true
}

// Running: a fake job has no attempt running.
func (f *fakeJob) Running() map[string][]report.Attempt { return nil }

func newFakeJob(n int) *fakeJob {
	rep := &report.Report{JobID: "j", Name: "fake", State: report.StateRunning, Started: time.Now(), Summary: report.Summary{Total: n}}
	for i := range n {
		rep.Tasks = append(rep.Tasks, report.Task{ID: fmt.Sprintf("%06d", i), State: report.TaskPending})
	}
	return &fakeJob{rep: rep}
}

type fakeSwarm []Peer

func (f fakeSwarm) Peers() []Peer { return append([]Peer(nil), f...) }

// serve runs a Server on addr until the test ends and returns its base URL.
func serve(t *testing.T, addr string, cfg Config) (string, *Server) {
	t.Helper()
	s := New(cfg)
	ln, err := s.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return "http://" + ln.Addr().String(), s
}

// readEvent reads one "update" event's JSON from an event stream.
func decodeEvent(data string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	return m, json.Unmarshal([]byte(data), &m)
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}
