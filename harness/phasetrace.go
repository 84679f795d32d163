package harness

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Phases are the marks of internal/phasetrace, in a lease's order.
var Phases = []string{"c.lease", "c.sent", "p.recv", "p.admit", "p.exec", "p.start", "p.end", "p.sent", "c.recv", "c.settled"}

// PhaseRecord is one lease's path: when it passed each phase (zero where
// no mark was made).
type PhaseRecord [10]time.Time

// ReadPhaseTrace reads P2PC_PHASE_TRACE files (internal/phasetrace), the
// coordinators' and the peers' (one file or several): one record per
// "c.lease" mark, the lease's later marks attached to it until it is
// settled. Lease IDs are per job run: the files may hold many runs, one
// after another.
func ReadPhaseTrace(paths ...string) ([]PhaseRecord, error) {
	var marks []mark
	for _, p := range paths {
		var err error
		if marks, err = readMarks(p, marks); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(marks, func(a, b mark) int { return int(a.t - b.t) })
	var recs []PhaseRecord
	open := map[string]int{} // lease -> its record, the latest "c.lease"
	for _, m := range marks {
		if m.phase == 0 {
			open[m.lease] = len(recs)
			var r PhaseRecord
			r[0] = time.Unix(0, m.t)
			recs = append(recs, r)
			continue
		}
		if i, ok := open[m.lease]; ok && recs[i][m.phase].IsZero() {
			recs[i][m.phase] = time.Unix(0, m.t)
			if m.phase == len(Phases)-1 {
				delete(open, m.lease)
			}
		}
	}
	return recs, nil
}

type mark struct {
	t     int64
	phase int
	lease string
}

// readMarks appends path's marks to marks.
func readMarks(path string, marks []mark) ([]mark, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read phase trace: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		x := strings.Fields(sc.Text())
		if len(x) != 4 {
			continue
		}
		t, err := strconv.ParseInt(x[0], 10, 64)
		i := slices.Index(Phases, x[2])
		if err != nil || i < 0 {
			continue
		}
		marks = append(marks, mark{t, i, x[3]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read phase trace: %w", err)
	}
	return marks, nil
}

// PhaseStep is the time from one phase to the next over many records.
type PhaseStep struct {
	From, To      string
	N             int
	P10, P50, P90 time.Duration
}

// PhaseSteps summarises the records' steps between consecutive phases
// (records that lack either mark are left out of that step), and the
// whole path from the lease to the plugin's end and to the settled
// result.
func PhaseSteps(recs []PhaseRecord) []PhaseStep {
	step := func(from, to int) PhaseStep {
		var d []time.Duration
		for _, r := range recs {
			if !r[from].IsZero() && !r[to].IsZero() {
				d = append(d, r[to].Sub(r[from]))
			}
		}
		slices.Sort(d)
		s := PhaseStep{From: Phases[from], To: Phases[to], N: len(d)}
		if len(d) > 0 {
			s.P10, s.P50, s.P90 = d[len(d)/10], d[len(d)/2], d[len(d)*9/10]
		}
		return s
	}
	var out []PhaseStep
	for i := 1; i < len(Phases); i++ {
		out = append(out, step(i-1, i))
	}
	return append(out, step(0, 6), step(0, 9))
}
