package job

import (
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// GraphLive is a running job with stages as a watcher (the web view)
// reads it: the tasks of every stage as one job's, each task's ID
// "<stage>/<id>" (a Live per stage), and a line per stage (Stages). Give
// one to RunGraph in GraphOptions.Live; a nil *GraphLive records
// nothing. Its methods are safe from any goroutine.
type GraphLive struct {
	mu sync.Mutex
	g  *graphRun
}

// NewGraphLive returns a GraphLive to pass to RunGraph.
func NewGraphLive() *GraphLive { return &GraphLive{} }

// LiveStage is a stage of a running graph, as the web view shows it.
type LiveStage struct {
	Name  string
	Needs []string
	// State is "waiting" (for the stages it needs), "running" or "over".
	State                                 string
	Tasks, Done, Failed, Blocked, Running int
}

// Stage states of a LiveStage.
const (
	StageWaiting = "waiting"
	StageRunning = "running"
	StageOver    = "over"
)

func (gl *GraphLive) attach(g *graphRun) {
	if gl == nil {
		return
	}
	for _, s := range g.stages {
		s.live = NewLive()
	}
	gl.mu.Lock()
	gl.g = g
	gl.mu.Unlock()
}

func (gl *GraphLive) graph() *graphRun {
	if gl == nil {
		return nil
	}
	gl.mu.Lock()
	defer gl.mu.Unlock()
	return gl.g
}

// Stages lists the graph's stages in its order (nil before it starts).
func (gl *GraphLive) Stages() []LiveStage {
	g := gl.graph()
	if g == nil {
		return nil
	}
	out := make([]LiveStage, len(g.stages))
	lives := make([]*Live, len(g.stages))
	g.mu.Lock()
	for k, si := range g.js.StageOrder() {
		s := g.stages[si]
		ls := LiveStage{Name: s.st.Name(), Needs: s.sr.Needs, Tasks: s.n(), State: StageWaiting}
		for _, st := range s.state {
			if st == taskBlocked {
				ls.Blocked++
			}
		}
		select {
		case <-s.over:
			ls.State = StageOver
		default:
			if s.started {
				ls.State = StageRunning
			}
		}
		out[k], lives[k] = ls, s.live
	}
	g.mu.Unlock()
	for k, l := range lives {
		// The stage's run counts its tasks done and failed; the graph
		// those it blocked.
		l.ReadJob(func(r *report.Report) { out[k].Done, out[k].Failed = r.Summary.Done, r.Summary.Failed })
		out[k].Running = len(l.Running())
	}
	return out
}

// ReadJob calls fn with the graph as one job's fields: its name, and the
// counts of every stage summed (a blocked task counts as failed: it will
// not run). Before the graph starts it does not call fn and reports
// false.
func (gl *GraphLive) ReadJob(fn func(*report.Report)) bool {
	head := gl.head()
	if head == nil {
		return false
	}
	fn(head)
	return true
}

func (gl *GraphLive) head() *report.Report {
	g := gl.graph()
	if g == nil {
		return nil
	}
	rep := &report.Report{Name: g.js.Name, State: report.StateRunning}
	var started time.Time
	for _, s := range g.stages {
		s.live.ReadJob(func(r *report.Report) {
			if started.IsZero() || r.Started.Before(started) {
				started = r.Started
			}
		})
	}
	rep.Started = started
	for _, ls := range gl.Stages() {
		rep.Summary.Total += ls.Tasks
		rep.Summary.Done += ls.Done
		rep.Summary.Failed += ls.Failed + ls.Blocked
	}
	return rep
}

// EachTask calls head with the graph's fields (as ReadJob's), then task
// with every task of every stage that started, stage after stage, its ID
// "<stage>/<id>" (Live.EachTask tells the terms).
func (gl *GraphLive) EachTask(head func(*report.Report), task func(*report.Task)) bool {
	g := gl.graph()
	h := gl.head()
	if h == nil {
		return false
	}
	head(h)
	for _, si := range g.js.StageOrder() {
		s := g.stages[si]
		name := s.st.Name() + "/"
		s.live.EachTask(func(*report.Report) {}, func(t *report.Task) {
			c := *t
			c.ID = name + t.ID
			task(&c)
		})
	}
	return true
}

// Running lists the attempts running now in every stage, by task ID
// ("<stage>/<id>"), as Live.Running.
func (gl *GraphLive) Running() map[string][]report.Attempt {
	g := gl.graph()
	if g == nil {
		return nil
	}
	out := map[string][]report.Attempt{}
	for _, s := range g.stages {
		name := s.st.Name() + "/"
		for id, as := range s.live.Running() {
			out[name+id] = as
		}
	}
	return out
}

// Sessions lists the peers every stage enrolled (Live.Sessions).
func (gl *GraphLive) Sessions() []PeerSession {
	g := gl.graph()
	if g == nil {
		return nil
	}
	var out []PeerSession
	for _, s := range g.stages {
		out = append(out, s.live.Sessions()...)
	}
	return out
}
