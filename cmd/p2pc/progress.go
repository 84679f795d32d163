package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/cheggaaa/pb/v3"
	"github.com/mattn/go-isatty"

	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/report"
)

// plainEvery bounds how often plain progress lines are printed.
const plainEvery = 2 * time.Second

// minBarWidth is the narrowest terminal a bar is drawn on.
const minBarWidth = 40

// progress shows a job's progress: done, failed, running and queued tasks
// apart. It draws a pb/v3 bar on a terminal that can show one (a tty, not
// TERM=dumb, at least minBarWidth columns), and prints plain lines
// otherwise: at most one every plainEvery, and the last. It implements
// job.Events.
type progress struct {
	w    io.Writer
	name string

	mu        sync.Mutex
	bar       *pb.ProgressBar
	width     int // terminal columns; 0: plain lines
	counts    job.Counts
	lastPrint time.Time
	printed   job.Counts // the counts of the last plain line
}

func newProgress(w *os.File, name string, bar bool) *progress {
	p := &progress{w: w, name: name}
	if bar {
		p.width = barWidth(w)
	}
	return p
}

// barWidth is the width of the terminal f, or 0 if it cannot show a bar.
func barWidth(f *os.File) int {
	if !isatty.IsTerminal(f.Fd()) || os.Getenv("TERM") == "dumb" {
		return 0
	}
	if w := termWidth(f); w >= minBarWidth {
		return w
	}
	return 0
}

func (p *progress) Started(total, done int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts = job.Counts{Total: total, Done: done, Queued: total - done}
	if done > 0 {
		fmt.Fprintf(p.w, "resuming: %d of %d tasks already done\n", done, total)
	}
	if p.width > 0 {
		tmpl := `{{string . "name"}} {{string . "counts"}} {{bar . }} {{percent . }} {{rtime . "ETA %s"}}`
		p.bar = pb.New(total).SetTemplateString(tmpl).SetWriter(p.w).SetWidth(p.width).Set("name", p.name)
		p.bar.Set("counts", countsText(p.counts))
		p.bar.SetCurrent(int64(done))
		p.bar.Start()
	}
}

// Counts updates the bar, or prints a plain line if plainEvery has passed
// or the tasks are over.
func (p *progress) Counts(c job.Counts) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts = c
	if p.bar != nil {
		p.bar.Set("counts", countsText(c))
		p.bar.SetCurrent(int64(c.Done + c.Failed))
		return
	}
	if c.Done+c.Failed == c.Total || time.Since(p.lastPrint) >= plainEvery {
		p.printLocked()
	}
}

func (p *progress) printLocked() {
	if p.counts == p.printed {
		return
	}
	p.lastPrint, p.printed = time.Now(), p.counts
	fmt.Fprintf(p.w, "%s: %s\n", p.name, countsText(p.counts))
}

// countsText is "3 of 10 done, 1 failed, 2 running, 4 queued".
func countsText(c job.Counts) string {
	return fmt.Sprintf("%d of %d done, %d failed, %d running, %d queued", c.Done, c.Total, c.Failed, c.Running, c.Queued)
}

// TaskDone needs nothing: Counts follows.
func (p *progress) TaskDone(string, bool) {}

func (p *progress) TaskRetry(id, outcome string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil && outcome != job.OutcomeReopened {
		headline, _ := report.Excerpt(err.Error())
		fmt.Fprintf(p.w, "task %s: %s, retrying: %s\n", id, outcome, headline)
	}
}

func (p *progress) TaskProgress(string, float64, string) {}

func (p *progress) TaskPartial(id string, data []byte) {}

// Finish stops the bar, or prints the last plain line.
func (p *progress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
		return
	}
	p.printLocked()
}
