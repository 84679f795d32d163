package webui

import (
	"bytes"
	"encoding/base64"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/p2pc/p2pc/internal/report"
)

// Limits of a snapshot.
const (
	maxFailures  = 10
	maxPartials  = 6
	errorTail    = 2 << 10 // bytes of an attempt's error (its stderr tail) shown
	partialText  = 2 << 10 // bytes of a text partial shown
	RateWindow   = 30 * time.Second
	seriesPoints = 720
)

// JobView is the job section: what the counters and the ETA show.
type JobView struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	State   string    `json:"state"`
	Error   string    `json:"error,omitempty"`
	Started time.Time `json:"started"`
	Total   int       `json:"total"`
	Done    int       `json:"done"`
	Failed  int       `json:"failed"`
	Running int       `json:"running"`
	Queued  int       `json:"queued"`
	// Rate is tasks settled per second over RateWindow; ETA in seconds
	// (-1: unknown).
	Rate float64 `json:"rate"`
	ETA  float64 `json:"eta"`
}

// Failure is a failed attempt with the tail of its error (for a crashed
// plugin, its last stderr lines).
type Failure struct {
	Task    string    `json:"task"`
	Peer    string    `json:"peer"`
	Outcome string    `json:"outcome"`
	Error   string    `json:"error"`
	Time    time.Time `json:"time"`
	Final   bool      `json:"final"` // the task failed for good
}

// PartialView is a task's latest partial result.
type PartialView struct {
	Task string    `json:"task"`
	Peer string    `json:"peer"`
	Time time.Time `json:"time"`
	Text string    `json:"text,omitempty"`
	// PNG is a data: URL when the partial is a PNG image.
	PNG string `json:"png,omitempty"`
	// Size is the partial's length in bytes.
	Size int `json:"size"`
}

// Point is one sample of the throughput series: settled tasks at T.
type Point struct {
	T       int64 `json:"t"` // unix milliseconds
	Settled int   `json:"n"`
}

// scan is what one pass over the report gathers.
type scan struct {
	job      JobView
	failures []Failure
	partials []PartialView
	// done and recent count accepted results per peer key (name or ID),
	// overall and within RateWindow.
	done, recent map[string]int
}

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// peerKey names a report peer as the swarm view matches it: by node ID
// when there is one, else by name.
func peerKey(peer, id string) (name, key string) {
	if id == "" {
		peer, id = report.SplitPeer(peer)
	}
	if id != "" {
		return peer, id
	}
	return peer, peer
}

// scanReport gathers what the snapshot shows of rep.
func scanReport(rep *report.Report, now time.Time) scan {
	sc := newScanner(rep, now)
	for i := range rep.Tasks {
		sc.add(&rep.Tasks[i])
	}
	return sc.result()
}

// scanner gathers what the snapshot shows a task at a time: it copies
// only what the snapshot shows, so that a job of a million tasks is never
// held (the job streams them: Job.EachTask).
type scanner struct {
	s               scan
	since           time.Time
	lastPartialTime time.Time
}

// newScanner starts a scan of the job whose fields are head's.
func newScanner(head *report.Report, now time.Time) *scanner {
	sc := &scanner{s: scan{done: map[string]int{}, recent: map[string]int{}}, since: now.Add(-RateWindow)}
	j := &sc.s.job
	j.ID, j.Name, j.State, j.Error, j.Started = head.JobID, head.Name, head.State, head.Error, head.Started
	j.Total, j.Done, j.Failed = head.Summary.Total, head.Summary.Done, head.Summary.Failed
	return sc
}

// add counts task t; it keeps no reference into t.
func (sc *scanner) add(t *report.Task) {
	s := &sc.s
	switch t.State {
	case report.TaskRunning:
		s.job.Running++
	case report.TaskDone:
		_, k := peerKey(t.Peer, t.PeerID)
		s.done[k]++
	}
	for a := range t.Attempts {
		at := &t.Attempts[a]
		switch at.Outcome {
		case report.OutcomeOK:
			if at.End.After(sc.since) {
				_, k := peerKey(at.Peer, at.PeerID)
				s.recent[k]++
			}
			continue
		case report.OutcomeLost, report.OutcomeCanceled:
			continue
		}
		if len(s.failures) == maxFailures && !at.End.After(s.failures[maxFailures-1].Time) {
			continue
		}
		name, _ := peerKey(at.Peer, at.PeerID)
		f := Failure{Task: t.ID, Peer: name, Outcome: at.Outcome, Error: tail(at.Error, errorTail), Time: at.End,
			Final: t.State == report.TaskFailed && a == len(t.Attempts)-1}
		s.failures = insertByTime(s.failures, f, maxFailures, func(f Failure) time.Time { return f.Time })
	}
	if n := len(t.Partials); n > 0 {
		p := &t.Partials[n-1]
		if len(s.partials) == maxPartials && !p.Time.After(sc.lastPartialTime) {
			return
		}
		s.partials = insertByTime(s.partials, partialView(t.ID, p), maxPartials, func(p PartialView) time.Time { return p.Time })
		sc.lastPartialTime = s.partials[len(s.partials)-1].Time
	}
}

// result ends the scan.
func (sc *scanner) result() scan {
	j := &sc.s.job
	j.Queued = max(j.Total-j.Done-j.Failed-j.Running, 0)
	return sc.s
}

// insertByTime keeps xs newest first and at most n long.
func insertByTime[T any](xs []T, x T, n int, at func(T) time.Time) []T {
	i := sort.Search(len(xs), func(i int) bool { return at(xs[i]).Before(at(x)) })
	xs = slices.Insert(xs, i, x)
	if len(xs) > n {
		xs = xs[:n]
	}
	return xs
}

func partialView(task string, p *report.Partial) PartialView {
	name, _ := peerKey(p.Peer, p.PeerID)
	v := PartialView{Task: task, Peer: name, Time: p.Time}
	switch {
	case len(p.Bytes) > 0 && bytes.HasPrefix(p.Bytes, pngMagic):
		v.PNG = "data:image/png;base64," + base64.StdEncoding.EncodeToString(p.Bytes)
		v.Size = len(p.Bytes)
	case len(p.Bytes) > 0:
		v.Text = "(" + itoa(len(p.Bytes)) + " bytes of binary data)"
		v.Size = len(p.Bytes)
	default:
		v.Text, v.Size = head(p.Text, partialText), len(p.Text)
	}
	return v
}

// tail keeps the last n bytes of s, cut at a rune boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return "…" + s
}

// head keeps the first n bytes of s, cut at a rune boundary.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	if n == 0 {
		return "0"
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// series is the throughput history: one point per step, the step
// doubling (and the points halving) whenever it is full, so a long job
// keeps its whole history in seriesPoints points.
type series struct {
	step   time.Duration
	points []Point
}

func (s *series) add(now time.Time, settled int) {
	if s.step == 0 {
		s.step = time.Second
	}
	if n := len(s.points); n > 0 && now.Sub(time.UnixMilli(s.points[n-1].T)) < s.step {
		return
	}
	s.points = append(s.points, Point{T: now.UnixMilli(), Settled: settled})
	if len(s.points) >= seriesPoints {
		half := s.points[:0]
		for i := 0; i < len(s.points); i += 2 {
			half = append(half, s.points[i])
		}
		s.points = half
		s.step *= 2
	}
}

// rate is settled tasks per second over the last window, with the number
// now (not yet a point) at now.
func (s *series) rate(now time.Time, settled int, window time.Duration) float64 {
	for i := range s.points {
		p := s.points[i]
		at := time.UnixMilli(p.T)
		if now.Sub(at) <= window {
			dt := now.Sub(at).Seconds()
			if dt < 1 {
				return 0
			}
			return float64(settled-p.Settled) / dt
		}
	}
	return 0
}

// eta is the seconds left at rate, -1 when unknown.
func eta(left int, rate float64) float64 {
	if left == 0 {
		return 0
	}
	if rate <= 0 {
		return -1
	}
	return float64(left) / rate
}

// finishPeers fills in what the report says of each peer and decides the
// state of those whose source left it open.
func finishPeers(peers []Peer, sc *scan) {
	if sc != nil {
		// This machine's own slots: what runs and is not on a peer.
		remote := 0
		for _, p := range peers {
			if !p.Self && p.Used > 0 {
				remote += p.Used
			}
		}
		for i := range peers {
			if p := &peers[i]; p.Self && p.Used < 0 {
				p.Used = min(max(sc.job.Running-remote, 0), p.Slots)
			}
		}
	}
	for i := range peers {
		p := &peers[i]
		if sc != nil {
			k := p.ID
			if k == "" {
				k = p.Name
			}
			p.Done = sc.done[k]
			p.Rate = float64(sc.recent[k]) / RateWindow.Seconds()
		}
		if p.State == "" {
			if p.Used > 0 || p.Rate > 0 {
				p.State = PeerWorking
			} else {
				p.State = PeerIdle
			}
		}
	}
	sort.SliceStable(peers, func(i, j int) bool {
		if peers[i].Self != peers[j].Self {
			return peers[i].Self
		}
		return strings.ToLower(peers[i].Name) < strings.ToLower(peers[j].Name)
	})
}
