package main

import (
	"fmt"
	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/report"
	"io"
	"os"
	"sync"
	"time"

	"github.com/cheggaaa/pb/v3"
	"github.com/mattn/go-isatty"
)

// progress shows a job's progress: a pb/v3 bar on a terminal, plain lines
// (at most one every two seconds, and the last) otherwise. It implements
// job.Events.
type progress struct {
	w    io.Writer
	name string
	tty  bool

	mu        sync.Mutex
	bar       *pb.ProgressBar
	total     int
	done      int
	failed    int
	finished  map[string]bool
	lastPrint time.Time
}

func newProgress(w *os.File, name string, bar bool) *progress {
	return &progress{w: w, name: name, tty: bar && isatty.IsTerminal(w.Fd())}
}

func (p *progress) Started(total, done int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.done = total, done
	if done > 0 {
		fmt.Fprintf(p.w, "resuming: %d of %d tasks already done\n", done, total)
	}
	if p.tty {
		tmpl := `{{string . "name"}} {{counters . }} {{bar . }} {{percent . }} {{speed . "%s tasks/s" ""}} {{rtime . "ETA %s"}}`
		p.bar = pb.New(total).SetTemplateString(tmpl).SetWriter(p.w).Set("name", p.name)
		p.bar.SetCurrent(int64(done))
		p.bar.Start()
	}
}

func (p *progress) TaskDone(id string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished == nil {
		p.finished = map[string]bool{}
	}
	if p.finished[id] {
		return
	}
	p.finished[id] = true
	p.done++
	if !ok {
		p.failed++
	}
	if p.bar != nil {
		p.bar.Increment()
		return
	}
	if p.done == p.total || time.Since(p.lastPrint) >= 2*time.Second {
		p.lastPrint = time.Now()
		fmt.Fprintf(p.w, "%s: %d/%d tasks done", p.name, p.done, p.total)
		if p.failed > 0 {
			fmt.Fprintf(p.w, " (%d failed)", p.failed)
		}
		fmt.Fprintln(p.w)
	}
}

func (p *progress) TaskRetry(id, outcome string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if outcome == job.OutcomeReopened && p.finished[id] {
		delete(p.finished, id)
		p.done--
		if p.bar != nil {
			p.bar.SetCurrent(int64(p.done))
		}
	}
	if p.bar == nil {
		headline, _ := report.Excerpt(err.Error())
		fmt.Fprintf(p.w, "task %s: %s, retrying: %s\n", id, outcome, headline)
	}
}

func (p *progress) TaskProgress(string, float64, string) {}

func (p *progress) TaskPartial(id string, data []byte) {}

// Finish stops the bar.
func (p *progress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
}
