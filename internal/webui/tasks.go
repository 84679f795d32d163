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
	ID       string   `json:"id"`
	State    string   `json:"state"`
	Peer     string   `json:"peer,omitempty"`
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
// from rep. It runs under the coordinator's lock: one pass, and only the
// page's rows are copied.
func pageOf(rep *report.Report, state string, offset, limit int) TaskPage {
	pg := TaskPage{Offset: offset, Rows: []TaskRow{}}
	for i := range rep.Tasks {
		t := &rep.Tasks[i]
		if state != "" && t.State != state {
			continue
		}
		pg.Total++
		if pg.Total <= offset || len(pg.Rows) >= limit {
			continue
		}
		row := TaskRow{ID: t.ID, State: t.State, Attempts: len(t.Attempts), Digest: t.Digest, Votes: len(t.Votes), Verdict: t.Verdict}
		row.Peer, _ = peerKey(t.Peer, t.PeerID)
		if n := len(t.Attempts); n > 0 {
			a := t.Attempts[n-1]
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
	return pg
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
	var pg TaskPage
	if !s.cfg.Job.ReadReport(func(rep *report.Report) { pg = pageOf(rep, state, offset, limit) }) {
		pg.Rows = []TaskRow{}
	}
	writeJSON(w, pg)
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
	s.cfg.Job.ReadReport(func(rep *report.Report) {
		for i := range rep.Tasks {
			t := &rep.Tasks[i]
			if t.ID != task || t.State != report.TaskDone {
				continue
			}
			for _, f := range t.Files {
				if path.Base(f) == name && path.Dir(f) == path.Join("tasks", task) {
					rel = f
				}
			}
			return
		}
	})
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
