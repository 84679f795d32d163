package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// lockShare is the share of time a snapshot may hold the coordinator's
// lock: a scan that took d waits d/lockShare before the next.
const lockShare = 0.01

// writeTimeout bounds one write to an event stream: a client that does
// not read is dropped.
const writeTimeout = 10 * time.Second

// hub builds snapshots while clients watch and sends each client the
// sections that changed.
type hub struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	clients  map[*client]struct{}
	sections map[string]json.RawMessage // the latest snapshot, by section
	built    time.Time                  // when it was built
	series   series
	nextScan time.Time
	wake     chan struct{} // a client arrived: build at once
	final    chan struct{} // closed by flush: streams send without waiting
	// ended counts the pages sent the end, fetched the task tables
	// fetched since (a page that got the end asks for its table's
	// final state once: flush waits for it a little).
	ended, fetched int
	// meters keep counters over time for their rates: each peer's Done
	// when there is no report to count from (the view of a peer), and
	// each served job's done tasks and CPU time.
	meters meters
}

// client is one event stream. pending holds the sections not yet sent
// (newer replace older: that is the coalescing).
type client struct {
	mu      sync.Mutex
	pending map[string]json.RawMessage
	poke    chan struct{}
}

func newHub(cfg Config, log *slog.Logger) *hub {
	return &hub{cfg: cfg, log: log, clients: map[*client]struct{}{}, sections: map[string]json.RawMessage{}, wake: make(chan struct{}, 1), final: make(chan struct{})}
}

func (h *hub) run(ctx context.Context) {
	t := time.NewTicker(h.cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.wake:
		}
		h.tick(time.Now())
	}
}

// tick samples the throughput (cheap: the summary only) and, when a
// client watches and the lock budget allows, builds a snapshot.
func (h *hub) tick(now time.Time) {
	h.mu.Lock()
	watched := len(h.clients) > 0
	due := !now.Before(h.nextScan)
	h.mu.Unlock()
	if h.cfg.Job != nil {
		var settled int
		if h.cfg.Job.ReadJob(func(r *report.Report) { settled = r.Summary.Done + r.Summary.Failed }) {
			h.mu.Lock()
			h.series.add(now, settled)
			h.mu.Unlock()
		}
	}
	if !watched || !due {
		return
	}
	h.publish(h.build(now))
}

// build makes a snapshot, by section.
func (h *hub) build(now time.Time) map[string]any {
	out := map[string]any{}
	var sc *scan
	if h.cfg.Job != nil {
		start := time.Now()
		var scn *scanner
		if h.cfg.Job.EachTask(func(head *report.Report) { scn = newScanner(head, now) }, func(t *report.Task) { scn.add(t) }) {
			s := scn.result()
			sc = &s
		}
		took := time.Since(start)
		h.mu.Lock()
		h.nextScan = start.Add(time.Duration(float64(took) / lockShare))
		if sc != nil {
			settled := sc.job.Done + sc.job.Failed
			h.series.add(now, settled)
			sc.job.Rate = h.series.rate(now, settled, RateWindow)
			sc.job.ETA = eta(sc.job.Total-settled, sc.job.Rate)
			out["series"] = h.series.points
		}
		h.mu.Unlock()
		if sc != nil {
			out["job"] = sc.job
			out["failures"] = nonNil(sc.failures)
			out["partials"] = nonNil(sc.partials)
		}
		if st, ok := h.cfg.Job.(Staged); ok {
			stages := st.Stages()
			for i := range stages {
				s := &stages[i]
				s.Queued = max(s.Total-s.Done-s.Failed-s.Blocked-s.Running, 0)
			}
			out["stages"] = nonNil(stages)
		}
	}
	var peers []Peer
	if h.cfg.Swarm != nil {
		peers = h.cfg.Swarm.Peers()
	}
	var served []ServedJob
	if h.cfg.Served != nil {
		served = h.cfg.Served.Served()
	}
	h.mu.Lock()
	if sc == nil {
		for i := range peers {
			p := &peers[i]
			p.Rate = h.meters.rate("peer/"+p.ID+"/"+p.Name, now, float64(p.Done), RateWindow)
		}
	}
	for i := range served {
		j := &served[i]
		k := "job/" + j.ID + "/" + j.SubmitterID
		j.Rate = h.meters.rate(k+"/done", now, float64(j.Done), RateWindow)
		j.CPU = h.meters.rate(k+"/cpu", now, j.CPUTime.Seconds(), cpuWindow)
	}
	h.meters.sweep(now)
	h.mu.Unlock()
	finishPeers(peers, sc)
	out["peers"] = nonNil(peers)
	if h.cfg.Served != nil {
		out["jobs"] = nonNil(served)
	}
	out["title"] = h.cfg.Title
	return out
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// publish keeps the snapshot and hands the changed sections to every
// client.
func (h *hub) publish(snap map[string]any) {
	changed := map[string]json.RawMessage{}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.built = time.Now()
	for k, v := range snap {
		data, err := json.Marshal(v)
		if err != nil {
			h.log.Warn("encode snapshot", "section", k, "err", err)
			continue
		}
		if string(h.sections[k]) != string(data) {
			h.sections[k] = data
			changed[k] = data
		}
	}
	if len(changed) == 0 {
		return
	}
	for c := range h.clients {
		c.offer(changed)
	}
}

func (c *client) offer(secs map[string]json.RawMessage) {
	c.mu.Lock()
	for k, v := range secs {
		c.pending[k] = v
	}
	c.mu.Unlock()
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

func (c *client) take() map[string]json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	c.pending = map[string]json.RawMessage{}
	return p
}

// join adds a client, primed with the whole latest snapshot.
func (h *hub) join() (*client, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.clients) >= h.cfg.MaxStreams {
		return nil, false
	}
	c := &client{pending: map[string]json.RawMessage{}, poke: make(chan struct{}, 1)}
	if len(h.sections) > 0 {
		c.offer(h.sections)
	}
	h.clients[c] = struct{}{}
	select {
	case h.wake <- struct{}{}:
	default:
	}
	return c, true
}

func (h *hub) leave(c *client) {
	h.mu.Lock()
	delete(h.clients, c)
	h.mu.Unlock()
}

// flush publishes a last snapshot and waits, until deadline, for every
// client to have taken what it was offered and, until the deadline
// after that, for the pages that took it to fetch their task table.
func (h *hub) flush(deadline time.Time) {
	h.flushEvents(deadline)
	for time.Now().Before(deadline.Add(time.Second)) {
		h.mu.Lock()
		left := h.ended - h.fetched
		h.mu.Unlock()
		if left <= 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fetchedTable notes that a page fetched its task table: after the end,
// flush waits for it.
func (h *hub) fetchedTable() {
	select {
	case <-h.final:
		h.mu.Lock()
		h.fetched++
		h.mu.Unlock()
	default:
	}
}

func (h *hub) flushEvents(deadline time.Time) {
	close(h.final)
	h.mu.Lock()
	watched := len(h.clients) > 0
	h.mu.Unlock()
	if !watched {
		return
	}
	snap := h.build(time.Now())
	snap["end"] = true // the page stops listening: nothing comes after this
	h.publish(snap)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		left := 0
		for c := range h.clients {
			c.mu.Lock()
			left += len(c.pending)
			c.mu.Unlock()
		}
		h.mu.Unlock()
		if left == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serveEvents streams "update" events, each a JSON object of the
// sections that changed, at most one per Every.
func (h *hub) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	c, ok := h.join()
	if !ok {
		http.Error(w, "too many event streams", http.StatusServiceUnavailable)
		return
	}
	defer h.leave(c)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	write := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := fmt.Fprint(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write("retry: 2000\n\n") {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keep.C:
			if !write(": keep-alive\n\n") {
				return
			}
		case <-c.poke:
			secs := c.take()
			data, err := json.Marshal(secs)
			if err != nil {
				return
			}
			if !write("event: update\ndata: " + string(data) + "\n\n") {
				return
			}
			if _, end := secs["end"]; end && h.cfg.Job != nil {
				h.mu.Lock()
				h.ended++
				h.mu.Unlock()
			}
			// Coalescing: whatever arrives meanwhile waits for the next.
			select {
			case <-r.Context().Done():
				return
			case <-h.final:
			case <-time.After(h.cfg.Every):
			}
		}
	}
}

// serveSnapshot answers the latest snapshot, built now if there is none
// or, when no page keeps the snapshots fresh, it is older than
// Config.Every and the lock budget allows a scan (a script polling the
// API sees the job and the swarm move).
func (h *hub) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	h.mu.Lock()
	stale := len(h.sections) == 0 || (now.Sub(h.built) >= h.cfg.Every && !now.Before(h.nextScan))
	h.mu.Unlock()
	if stale {
		h.publish(h.build(now))
	}
	h.mu.Lock()
	data, err := json.Marshal(h.sections)
	h.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
