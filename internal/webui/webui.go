package webui

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/transport"
)

// Default listen addresses of `p2pc run --ui` and `p2pc join --ui` given
// without an address.
const (
	DefaultRunAddr  = "127.0.0.1:7480"
	DefaultJoinAddr = "127.0.0.1:7481"
)

// Job is a running job as the view reads it. ReadJob calls fn with the
// job's fields only (no tasks: cheap, under the coordinator's lock; fn is
// quick and keeps no reference). EachTask calls head with the job's
// fields, then task with every task's record in task order, one at a
// time (a large job's costs reading its job database, not holding it);
// neither keeps a reference into what it is given. Both report false
// before the job starts, ReadJob without calling fn; EachTask reports
// false also when it could not read every task (what it gave is then to
// be dropped). Running lists the attempts running now by task ID, oldest
// first (the first copy, then replicas and backups), each with its peer
// and start; it is called outside EachTask, never from its callbacks.
type Job interface {
	ReadJob(fn func(*report.Report)) bool
	EachTask(head func(*report.Report), task func(*report.Task)) bool
	Running() map[string][]report.Attempt
}

// Staged is a Job with stages: the page shows a line per stage.
type Staged interface {
	Stages() []Stage
}

// Stage is a stage of a job with stages: its counts, and its state
// ("waiting" for the stages it needs, "running" or "over").
type Stage struct {
	Name    string   `json:"name"`
	Needs   []string `json:"needs,omitempty"`
	State   string   `json:"state"`
	Total   int      `json:"total"`
	Done    int      `json:"done"`
	Failed  int      `json:"failed"`
	Blocked int      `json:"blocked"`
	Running int      `json:"running"`
	Queued  int      `json:"queued"`
}

// Served lists the jobs this node serves or served lately (the view of
// a peer: p2pc join --ui), newest first.
type Served interface {
	Served() []ServedJob
}

// ServedJob is a job a peer serves: its counts on this peer, and the
// CPU and memory its tasks' processes use here.
type ServedJob struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Submitter   string    `json:"submitter"`
	SubmitterID string    `json:"submitter_id,omitempty"`
	Since       time.Time `json:"since"`
	// Serving: a work session of the job is open now; else it ended.
	Serving bool `json:"serving"`
	Running int  `json:"running"`
	Queued  int  `json:"queued"`
	Done    int  `json:"done"`
	Failed  int  `json:"failed"`
	// CPUTime is the CPU time its plugin processes (and what they
	// started) have used, as long as they live; Memory the bytes they
	// hold resident now.
	CPUTime time.Duration `json:"-"`
	Memory  int64         `json:"memory"`
	// Rate (tasks done per second over RateWindow) and CPU (cores busy,
	// over the last few seconds) are filled in by the view.
	Rate float64 `json:"rate"`
	CPU  float64 `json:"cpu"`
}

// Swarm lists the peers as this node sees them.
type Swarm interface {
	Peers() []Peer
}

// Peer states.
const (
	PeerWorking = "working"
	PeerIdle    = "idle"
	PeerPaused  = "paused"
	PeerLost    = "lost"
)

// Peer is one node of the swarm view.
type Peer struct {
	Name string `json:"name"`
	ID   string `json:"id,omitempty"`
	OS   string `json:"os,omitempty"`
	Arch string `json:"arch,omitempty"`
	// Slots and Used: task slots, and how many run now (-1: unknown).
	Slots int `json:"slots"`
	Used  int `json:"used"`
	// Done counts accepted results (the view fills it from the job's
	// report when it has one); Rate is tasks/s over the last RateWindow.
	Done int     `json:"done"`
	Rate float64 `json:"rate"`
	// State: one of the Peer* states; empty lets the view decide between
	// working and idle.
	State string `json:"state"`
	// GPUs summarizes the GPUs it offers as GPU slots, counted in Slots
	// ("2 × NVIDIA H200"); "" for none.
	GPUs string `json:"gpus,omitempty"`
	// Confinement is what confines its tasks, when known.
	Confinement string `json:"confinement,omitempty"`
	// Note says more (why a peer is lost).
	Note string `json:"note,omitempty"`
	Self bool   `json:"self,omitempty"`
}

// Config sets up a Server.
type Config struct {
	// Title heads the page ("job NAME", "peer NAME").
	Title string
	// Job is nil on a peer: the page then shows the swarm and, with
	// Served, the jobs the peer serves.
	Job    Job
	Swarm  Swarm
	Served Served
	// OutDir is the job's output folder: PNG outputs of done tasks are
	// served from it (only files the report lists).
	OutDir string
	// Tokens grant access; the first is the one the page's cookie holds.
	// Without tokens nobody may act, and a non-loopback address is refused.
	Tokens []string
	// Cancel cancels the job (nil: no cancel button).
	Cancel func()
	// Every is the shortest time between two updates (default 250ms).
	Every time.Duration
	// MaxStreams bounds concurrent event streams (default 4096).
	MaxStreams int
	Logger     *slog.Logger
}

//go:embed assets
var assets embed.FS

// Server is the web view.
type Server struct {
	cfg  Config
	log  *slog.Logger
	hub  *hub
	open bool // loopback: reading needs no token
	srv  *http.Server
}

// New makes a server; Serve runs it.
func New(cfg Config) *Server {
	if cfg.Every <= 0 {
		cfg.Every = 250 * time.Millisecond
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "webui")}
	s.hub = newHub(cfg, s.log)
	return s
}

// Listen opens addr for Serve. A non-loopback address needs tokens.
func (s *Server) Listen(addr string) (net.Listener, error) {
	if !IsLoopback(addr) && len(s.cfg.Tokens) == 0 {
		return nil, fmt.Errorf("web view on %s: not a loopback address, and there is no token to protect it (make a swarm: p2pc swarm init)", addr)
	}
	// A browser speaks tcp: the web view listens on the tcp transport.
	ln, err := transport.TCP{}.Listen(context.Background(), addr)
	if err != nil {
		return nil, fmt.Errorf("web view: %w", err)
	}
	return ln, nil
}

// IsLoopback reports whether addr (host:port) names a loopback address
// only. "localhost" counts; an empty host (every interface) does not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL is the address to open for ln: with the token, so that the
// browser may act (and, off loopback, read).
func (s *Server) URL(ln net.Listener) string {
	u := "http://" + ln.Addr().String() + "/"
	if len(s.cfg.Tokens) > 0 {
		u += "?token=" + s.cfg.Tokens[0]
	}
	return u
}

// Serve serves on ln until ctx ends. Then it sends connected pages a
// last snapshot (the job's end), waiting up to a second for them to take
// it, and stops.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.open = IsLoopback(ln.Addr().String())
	// Requests live until the last snapshot went out, not until ctx ends.
	reqCtx, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return reqCtx },
	}
	hctx, stopHub := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.hub.run(hctx)
	}()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		<-done
		s.hub.flush(time.Now().Add(time.Second))
		endRequests()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(sctx)
		_ = s.srv.Close()
	}()
	err := s.srv.Serve(ln)
	stopHub()
	endRequests()
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("web view: %w", err)
}

// Handler is the view's HTTP handler (Serve uses it; tests too).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.read(func(w http.ResponseWriter, r *http.Request) {
		if tok := r.URL.Query().Get("token"); tok != "" && s.valid(tok) {
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.cfg.Tokens[0], Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, "/", http.StatusSeeOther) // keep the token out of the address bar
			return
		}
		data, err := assets.ReadFile("assets/index.html")
		if err != nil {
			http.Error(w, "page missing", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(data)
	}))
	mux.HandleFunc("GET /assets/{name}", s.read(serveAsset))
	mux.HandleFunc("GET /api/events", s.read(s.hub.serveEvents))
	mux.HandleFunc("GET /api/snapshot", s.read(s.hub.serveSnapshot))
	mux.HandleFunc("GET /api/tasks", s.read(s.serveTasks))
	mux.HandleFunc("GET /api/file", s.read(s.serveFile))
	mux.HandleFunc("GET /api/access", s.read(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"act": s.authorized(r), "cancel": s.cfg.Cancel != nil, "title": s.cfg.Title, "job": s.cfg.Job != nil, "served": s.cfg.Served != nil})
	}))
	mux.HandleFunc("POST /api/cancel", s.act(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Cancel == nil {
			http.Error(w, "nothing to cancel", http.StatusNotFound)
			return
		}
		s.log.Warn("job cancelled from the web view", "from", r.RemoteAddr)
		s.cfg.Cancel()
		writeJSON(w, map[string]any{"ok": true})
	}))
	return secureHeaders(mux)
}

const cookieName = "p2pc_ui"

// serveAsset answers one embedded file by its plain name: no folders, no
// listings, nothing but the page's own scripts and styles.
func serveAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ct := mime.TypeByExtension(path.Ext(name))
	if !fs.ValidPath(name) || strings.ContainsAny(name, "/\\") || name == "index.html" || ct == "" {
		http.NotFound(w, r)
		return
	}
	data, err := assets.ReadFile("assets/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Write(data)
}

// secureHeaders: no framing, no sniffing, only our own scripts.
func secureHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// valid reports whether tok is one of the tokens (in constant time).
func (s *Server) valid(tok string) bool {
	ok := 0
	for _, t := range s.cfg.Tokens {
		ok |= subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(t))
	}
	return ok == 1
}

// authorized: the request carries a token.
func (s *Server) authorized(r *http.Request) bool {
	if c, err := r.Cookie(cookieName); err == nil && s.valid(c.Value) {
		return true
	}
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") && s.valid(a[len("Bearer "):]) {
		return true
	}
	if tok := r.URL.Query().Get("token"); tok != "" && s.valid(tok) {
		return true
	}
	return false
}

// read lets a request read when the view is on loopback or it has a token.
func (s *Server) read(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.open && !s.authorized(r) {
			http.Error(w, "this view needs its token: open the URL p2pc printed", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

// act lets a request act when it has a token and the header no
// cross-site form can send.
func (s *Server) act(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<10)
		if !s.authorized(r) {
			http.Error(w, "acting needs the token: open the URL p2pc printed", http.StatusUnauthorized)
			return
		}
		if r.Header.Get("X-P2PC-UI") != "1" {
			http.Error(w, "missing X-P2PC-UI header", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}
