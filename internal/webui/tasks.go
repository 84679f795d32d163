package webui

import (
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// Task table limits.
const (
	maxPageRows = 500
	maxPNGSize  = 16 << 20
)

// TaskRow is one row of the task table.
type TaskRow struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Peer  string `json:"peer,omitempty"`
	// On are the peers running the task now, the first copy first, then
	// its replicas and backups (a running task's Peer is the first).
	On       []string `json:"on,omitempty"`
	Attempts int      `json:"attempts"`
	Duration float64  `json:"duration"` // seconds of the last attempt
	Digest   string   `json:"digest,omitempty"`
	Votes    int      `json:"votes"`
	Verdict  string   `json:"verdict,omitempty"`
	Error    string   `json:"error,omitempty"`
	PNGs     []string `json:"pngs,omitempty"` // PNG output files
}

// TaskPage is one page of the task table.
type TaskPage struct {
	Total  int       `json:"total"` // matching rows
	Offset int       `json:"offset"`
	Rows   []TaskRow `json:"rows"`
}

// pageOf copies one page of the tasks in state ("" or "all": every task)
// from rep.
func pageOf(rep *report.Report, running map[string][]report.Attempt, state string, offset, limit int) TaskPage {
	pg := newPager(state, offset, limit, running)
	for i := range rep.Tasks {
		pg.add(&rep.Tasks[i])
	}
	return pg.page
}

// pager makes one page of the task table a task at a time (the job
// streams them: Job.EachTask); only the page's rows are copied.
type pager struct {
	page          TaskPage
	state         string
	offset, limit int
	running       map[string][]report.Attempt // Job.Running
}

func newPager(state string, offset, limit int, running map[string][]report.Attempt) *pager {
	return &pager{page: TaskPage{Offset: offset, Rows: []TaskRow{}}, state: state, offset: offset, limit: limit, running: running}
}

// add counts task t and copies its row when it is on the page.
func (p *pager) add(t *report.Task) {
	pg := &p.page
	if p.state != "" && t.State != p.state {
		return
	}
	pg.Total++
	if pg.Total <= p.offset || len(pg.Rows) >= p.limit {
		return
	}
	row := TaskRow{ID: t.ID, State: t.State, Attempts: len(t.Attempts), Digest: t.Digest, Votes: len(t.Votes), Verdict: t.Verdict}
	row.Peer, _ = peerKey(t.Peer, t.PeerID)
	if t.State == report.TaskRunning {
		for _, a := range p.running[t.ID] {
			name, _ := peerKey(a.Peer, a.PeerID)
			row.On = append(row.On, name)
		}
		if len(row.On) > 0 && row.Peer == "" {
			row.Peer = row.On[0]
		}
	}
	if n := len(t.Attempts); n > 0 {
		a := t.Attempts[n-1]
		if row.Peer == "" && len(row.On) == 0 {
			row.Peer, _ = peerKey(a.Peer, a.PeerID) // where it last ran (a failed task)
		}
		row.Duration = a.End.Sub(a.Start).Round(time.Millisecond).Seconds()
		if a.Outcome != report.OutcomeOK {
			row.Error = tail(a.Error, 300)
		}
	}
	for _, f := range t.Files {
		if strings.HasSuffix(strings.ToLower(f), ".png") {
			row.PNGs = append(row.PNGs, path.Base(f))
		}
	}
	pg.Rows = append(pg.Rows, row)
}

var taskStates = map[string]bool{"": true, report.TaskPending: true, report.TaskRunning: true, report.TaskDone: true, report.TaskFailed: true}

// serveTasks answers GET /api/tasks?state=S&offset=N&limit=N.
func (s *Server) serveTasks(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Job == nil {
		http.Error(w, "no job on this node", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	if state == "all" {
		state = ""
	}
	if !taskStates[state] {
		http.Error(w, "state: one of all, pending, running, done, failed", http.StatusBadRequest)
		return
	}
	offset, err1 := intParam(q.Get("offset"), 0)
	limit, err2 := intParam(q.Get("limit"), 50)
	if err1 != nil || err2 != nil || offset < 0 || limit < 1 {
		http.Error(w, "offset and limit: non-negative integers, limit at least 1", http.StatusBadRequest)
		return
	}
	limit = min(limit, maxPageRows)
	running := s.cfg.Job.Running()
	pg := newPager(state, offset, limit, running)
	started := false
	if !s.cfg.Job.EachTask(func(*report.Report) { started = true }, pg.add) {
		if started {
			// Reading the job database failed part way: the page says
			// so and asks again, rather than show an empty table.
			http.Error(w, "the task table could not be read now; try again", http.StatusServiceUnavailable)
			return
		}
		pg = newPager(state, offset, limit, nil) // before the job starts: no tasks yet
		pg.page.Offset = 0
	}
	writeJSON(w, pg.page)
	s.hub.fetchedTable()
}

func intParam(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	if len(v) > 10 {
		return 0, strconv.ErrRange
	}
	return strconv.Atoi(v)
}

// serveFile answers GET /api/file?task=ID&name=NAME: a PNG output of a
// done task, only if the report lists it among the task's files.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	task, name := q.Get("task"), q.Get("name")
	if s.cfg.Job == nil || s.cfg.OutDir == "" || task == "" || name == "" || !strings.HasSuffix(strings.ToLower(name), ".png") {
		http.NotFound(w, r)
		return
	}
	var rel string
	if !s.cfg.Job.EachTask(func(*report.Report) {}, func(t *report.Task) {
		if rel != "" || t.ID != task || t.State != report.TaskDone {
			return
		}
		for _, f := range t.Files {
			if path.Base(f) == name && path.Dir(f) == path.Join("tasks", task) {
				rel = f
			}
		}
	}) {
		rel = ""
	}
	if rel == "" {
		http.NotFound(w, r)
		return
	}
	f, err := os.Open(filepath.Join(s.cfg.OutDir, filepath.FromSlash(rel)))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > maxPNGSize {
		http.NotFound(w, r)
		return
	}
	head := make([]byte, len(pngMagic))
	if _, err := f.ReadAt(head, 0); err != nil || string(head) != string(pngMagic) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	http.ServeContent(w, r, "", st.ModTime(), f)
}
