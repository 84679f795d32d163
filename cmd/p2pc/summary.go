package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// shownFailures is how many failed tasks the summary describes; the
// report has them all.
const shownFailures = 5

// taskSums is what the summary says of the tasks, read from the job
// database (summaryTasks) and the spec.
type taskSums struct {
	// count is the accepted results by peer; agreed, the replicas by peer
	// that voted for an accepted result another peer produced.
	count, agreed map[string]int
	// failed are the first failed tasks (shownFailures of them, when there
	// are that many).
	failed []*report.Task
	// retries is the spec's; stalled, the run gave up waiting for a peer
	// that could take the work left (--wait-peers): those tasks did not
	// fail, they were left undone.
	retries int
	stalled bool
}

// shownWarnings is how many of the report's warnings the summary prints.
const shownWarnings = 5

// printSummary says how the job ended: the counts, where it ran, the
// report's first warnings (a peer that got no task, and why), why each of
// the first failed tasks failed, and where the results are.
func printSummary(w io.Writer, rep *report.Report, sums taskSums, out string, took time.Duration) {
	s := rep.Summary
	if sums.stalled {
		fmt.Fprintf(w, "job %s (%.12s) stalled after %s: %d of %d tasks done", rep.Name, rep.JobID, took.Round(time.Millisecond), s.Done, s.Total)
	} else {
		fmt.Fprintf(w, "job %s (%.12s) %s: %d of %d tasks done", rep.Name, rep.JobID, rep.State, s.Done, s.Total)
	}
	if s.Reused > 0 {
		fmt.Fprintf(w, " (%d reused from an earlier run)", s.Reused)
	}
	if sums.stalled {
		fmt.Fprintf(w, ", %d left undone (no peer could take them within --wait-peers)", s.Total-s.Done-s.Failed)
	}
	if s.Failed > 0 {
		fmt.Fprintf(w, ", %d failed", s.Failed)
	}
	if sums.stalled {
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, " in %s\n", took.Round(time.Millisecond))
	}
	if share := peerShares(sums.count); share != "" {
		fmt.Fprintf(w, "  ran on: %s", share)
		if agreed := peerShares(sums.agreed); agreed != "" {
			fmt.Fprintf(w, "; replicas that agreed: %s", agreed)
		}
		fmt.Fprintln(w)
	}
	if sc := rep.SpotChecks; sc != nil {
		fmt.Fprintf(w, "  spot checks: %d re-run on this machine, %d caught a wrong result", sc.Checked, len(sc.Caught))
		var liars []string
		for _, c := range sc.Caught {
			for _, p := range c.Peers {
				if !slices.Contains(liars, p) {
					liars = append(liars, p)
				}
			}
		}
		if len(liars) > 0 {
			fmt.Fprintf(w, "; excluded as liars: %s", strings.Join(liars, ", "))
		}
		if len(sc.Reinstated) > 0 {
			fmt.Fprintf(w, "; reinstated (outvoted by them): %s", strings.Join(sc.Reinstated, ", "))
		}
		fmt.Fprintln(w)
	}
	for _, warn := range rep.Warnings[:min(len(rep.Warnings), shownWarnings)] {
		fmt.Fprintf(w, "  warning: %s\n", warn)
	}
	if more := len(rep.Warnings) - shownWarnings; more > 0 {
		fmt.Fprintf(w, "  ... %d more warnings: see %s\n", more, filepath.Join(out, report.FileName))
	}
	failed := sums.failed
	for _, t := range failed[:min(len(failed), shownFailures)] {
		for _, l := range failureLines(*t, sums.retries) {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	if more := rep.Summary.Failed - shownFailures; len(failed) >= shownFailures && more > 0 {
		fmt.Fprintf(w, "  ... %d more failed: see %s\n", more, filepath.Join(out, report.FileName))
	}
	for _, o := range rep.Outputs {
		fmt.Fprintf(w, "  output: %s\n", filepath.Join(out, o))
	}
	// The run writes report.json as it ends, unless its disk is full.
	if fi, err := os.Stat(filepath.Join(out, report.FileName)); err == nil && !fi.ModTime().Before(rep.Finished.Add(-time.Second)) {
		fmt.Fprintf(w, "  report: %s\n", filepath.Join(out, report.FileName))
	} else {
		fmt.Fprintf(w, "  state: %s (p2pc status %s; p2pc report %s writes report.json)\n", filepath.Join(out, jobdb.FileName), out, out)
	}
}

// failureLines says why failed task t failed: a headline, and the last
// lines of the plugin's stderr (or where a panic happened) indented below
// it, its attempts named by kind (report.Runs). When the last attempt's error is the reason, the headline names the
// attempt, its peer and its outcome. `p2pc logs` shows the full text.
func failureLines(t report.Task, retries int) []string {
	why := failReason(t)
	verified := t.Verdict != "" || len(t.Votes) > 0
	head := fmt.Sprintf("task %s failed after %s", t.ID, report.CountRuns(&t).Describe(retries, verified))
	if n := len(t.Attempts); n > 0 && t.Attempts[n-1].Error == why {
		a := t.Attempts[n-1]
		head += fmt.Sprintf("; attempt %d on %s: %s", n, a.Peer, a.Outcome)
	}
	headline, detail := report.Excerpt(why)
	lines := []string{head + ": " + headline}
	for _, d := range detail {
		lines = append(lines, "    "+d)
	}
	return lines
}

// failReason is the task's recorded reason, else (a report of an older
// p2pc) its verdict or its last attempt's error.
func failReason(t report.Task) string {
	switch {
	case t.Error != "":
		return t.Error
	case strings.HasPrefix(t.Verdict, "failed: "):
		return strings.TrimPrefix(t.Verdict, "failed: ")
	case len(t.Attempts) > 0 && t.Attempts[len(t.Attempts)-1].Error != "":
		return t.Attempts[len(t.Attempts)-1].Error
	}
	return "no reason recorded"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// agreedShares counts, by peer, the replicas that voted for the accepted
// result of a task another peer produced (verified jobs): they ran the
// task as much as the peer named in tasks[].peer.
func agreedShares(ctx context.Context, db *jobdb.DB) (map[string]int, error) {
	rows, err := db.SQL().QueryContext(ctx, `SELECT v.peer, count(*) FROM votes v JOIN tasks t ON t.idx = v.task
		WHERE t.state = ? AND t.digest != '' AND v.digest = t.digest AND v.peer != t.peer GROUP BY v.peer`, report.TaskDone)
	if err != nil {
		return nil, fmt.Errorf("count the replicas that agreed: %w", err)
	}
	defer rows.Close()
	count := map[string]int{}
	for rows.Next() {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			return nil, fmt.Errorf("count the replicas that agreed: %w", err)
		}
		count[p] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count the replicas that agreed: %w", err)
	}
	return count, nil
}
