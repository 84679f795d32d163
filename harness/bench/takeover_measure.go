package bench

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// What the takeover suite reads from reports and logs; the takeover
// tests of cmd/p2pc measure with the same functions.

// FirstLeaseAfter is the start of the earliest attempt in rep that began
// after at and was leased by the job's coordinator then (not handed over:
// a peer starts a lease it holds ahead before it learns that its
// coordinator died); zero if none did.
func FirstLeaseAfter(rep *report.Report, at time.Time) time.Time {
	var first time.Time
	for _, task := range rep.Tasks {
		for _, a := range task.Attempts {
			if !a.HandedOver && a.Start.After(at) && (first.IsZero() || a.Start.Before(first)) {
				first = a.Start
			}
		}
	}
	return first
}

// Reruns is what the peers' logs say about tasks run to their end more
// than once.
type Reruns struct {
	// Ran counts the tasks some peer ran to their end.
	Ran int `json:"ran"`
	// Again counts the tasks run to their end more than once (not
	// counting runs whose result died with a dead member, nor tasks a
	// coordinator started a backup copy of): finished work done again.
	Again int `json:"again"`
	// Lost counts the runs on a dead member whose result was not the one
	// accepted: the result died with it (running it again is right).
	Lost int `json:"lost_with_dead"`
	// Backups counts the tasks a coordinator started a backup copy of (a
	// straggler: run twice on purpose).
	Backups int `json:"backups"`
	// Examples describe up to five tasks of Again.
	Examples []string `json:"examples,omitempty"`
}

// taskRanRe matches a peer's debug line for a task it ran to its end;
// backupRe a coordinator's for a backup copy of a straggler.
var (
	taskRanRe = regexp.MustCompile(`msg="task ran" .*task=(\S+) .*outcome=ok`)
	backupRe  = regexp.MustCompile(`msg="backup copy of a straggler" .*task=(\S+)`)
)

// RanAgain reads the peers' logs (by name; they must log at debug) against
// the job's report: which finished tasks ran to their end again. dead
// names the members that died during the job.
func RanAgain(logs map[string]string, rep *report.Report, dead ...string) Reruns {
	accepted := map[string]string{}
	for _, task := range rep.Tasks {
		accepted[task.ID] = task.Peer
	}
	runs, backups := map[string][]string{}, map[string]bool{}
	for _, name := range sortedKeys(logs) {
		for _, m := range taskRanRe.FindAllStringSubmatch(logs[name], -1) {
			runs[m[1]] = append(runs[m[1]], name)
		}
		for _, m := range backupRe.FindAllStringSubmatch(logs[name], -1) {
			backups[m[1]] = true
		}
	}
	out := Reruns{Ran: len(runs), Backups: len(backups)}
	for _, task := range sortedKeys(runs) {
		on := runs[task]
		n := len(on)
		for _, p := range on {
			if slices.Contains(dead, p) && accepted[task] != p {
				n-- // its result died with it
				out.Lost++
			}
		}
		if n > 1 && !backups[task] {
			out.Again++
			if len(out.Examples) < 5 {
				out.Examples = append(out.Examples, fmt.Sprintf("task %s ran to its end on %s (accepted from %s)", task, strings.Join(on, ", "), accepted[task]))
			}
		}
	}
	return out
}

// NotAcceptedOnce describes the tasks of rep that are not done with
// exactly one accepted attempt: a result counted twice, or none.
func NotAcceptedOnce(rep *report.Report) []string {
	var out []string
	for _, task := range rep.Tasks {
		ok := 0
		for _, a := range task.Attempts {
			if a.Outcome == report.OutcomeOK {
				ok++
			}
		}
		if task.State != report.TaskDone || ok != 1 {
			out = append(out, fmt.Sprintf("task %s: state %s, %d ok attempts: %+v", task.ID, task.State, ok, task.Attempts))
		}
	}
	return out
}

// logTimeRe reads the time of a log line (slog's text format).
var logTimeRe = regexp.MustCompile(`^time=(\S+) `)

// logLineAt is the time of the first line of log that re matches; zero
// if none does.
func logLineAt(log string, re *regexp.Regexp) time.Time {
	for line := range strings.Lines(log) {
		if !re.MatchString(line) {
			continue
		}
		if m := logTimeRe.FindStringSubmatch(line); m != nil {
			if at, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
				return at
			}
		}
	}
	return time.Time{}
}

// copiesSent is an owner's "copies sent" line (package swarmjobs, sent.go):
// the bytes of the copies of one job it sent to other members while it
// owned the job.
type copiesSent struct {
	Tasks        int   `json:"tasks"`
	Bytes        int64 `json:"bytes"`
	StateBytes   int64 `json:"state_bytes"`
	StateHolds   int   `json:"state_holds"`
	ResultsBytes int64 `json:"results_bytes"`
	JobBytes     int64 `json:"job_bytes"`
	RecordBytes  int64 `json:"record_bytes"`
}

var copiesSentRe = regexp.MustCompile(`msg="copies sent" .*?job=(\S+) epoch=\d+ tasks=(\d+) bytes=(\d+) state_bytes=(\d+) state_holds=(\d+) results_bytes=(\d+) job_bytes=(\d+) record_bytes=(\d+)`)

// parseCopiesSent finds the "copies sent" line of job id in log.
func parseCopiesSent(log, id string) (copiesSent, bool) {
	for _, m := range copiesSentRe.FindAllStringSubmatch(log, -1) {
		if !strings.HasPrefix(id, m[1]) {
			continue
		}
		var c copiesSent
		_, err := fmt.Sscan(strings.Join(m[2:], " "), &c.Tasks, &c.Bytes, &c.StateBytes, &c.StateHolds, &c.ResultsBytes, &c.JobBytes, &c.RecordBytes)
		return c, err == nil
	}
	return copiesSent{}, false
}
