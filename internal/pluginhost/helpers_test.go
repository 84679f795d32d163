//go:build linux

package pluginhost

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/pluginproto"
	"github.com/p2pc/p2pc/internal/testwait"
	"github.com/p2pc/p2pc/plugins/sdk"
)

var self struct {
	once sync.Once
	path string
	sum  [32]byte
	err  error
}

// selfPlugin returns the test binary's path and digest.
func selfPlugin(t testing.TB) (string, [32]byte) {
	t.Helper()
	self.once.Do(func() {
		if self.path, self.err = os.Executable(); self.err == nil {
			self.sum, self.err = digest.File(self.path)
		}
	})
	if self.err != nil {
		t.Fatal(self.err)
	}
	return self.path, self.sum
}

// testConfig runs the test binary as a plugin in mode.
func testConfig(t testing.TB, mode string) (Config, *capture) {
	path, sum := selfPlugin(t)
	c := newCapture()
	return Config{
		Path:     path,
		Checksum: sum,
		Logger:   slog.New(c),
		Env:      []string{envPlugin + "=" + mode},
	}, c
}

func newTestPool(t testing.TB, size int) (*Pool, *capture) {
	cfg, c := testConfig(t, "task")
	pl := NewPool(cfg, size)
	t.Cleanup(func() { pl.Close() })
	return pl, c
}

func req(id string, p params) *sdk.Request {
	return &sdk.Request{JobID: "job", TaskID: id, Params: mustJSON(p)}
}

// runPID runs op "pid" and returns the plugin's pid.
func runPID(t testing.TB, pl *Pool) int {
	t.Helper()
	res, err := pl.Run(context.Background(), req("pid", params{Op: "pid"}), nil, 10*time.Second)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return atoi(t, string(res.Data))
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return n
}

// procState returns the state letter of pid ("" if there is no such
// process) and its parent pid.
func procState(pid int) (string, int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return "", 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return f[0], ppid
}

// alive: pid exists and is not a zombie.
func alive(pid int) bool {
	s, _ := procState(pid)
	return s != "" && s != "Z" && s != "X"
}

// waitDead fails unless pid is dead within d, and not a zombie of ours.
func waitDead(t testing.TB, pid int, d time.Duration, what string) {
	t.Helper()
	testwait.For(t, d, fmt.Sprintf("%s (pid %d) to die, not left a zombie child of the test process", what, pid), func() bool {
		s, ppid := procState(pid)
		return !alive(pid) && !(s == "Z" && ppid == os.Getpid())
	})
}

// testHost records a call's callbacks.
type testHost struct {
	sdk.UnsupportedHost
	mu       sync.Mutex
	progress []string
	partials []string
	got      chan string // every partial, unbuffered readers may lag
}

func newTestHost() *testHost { return &testHost{got: make(chan string, 16)} }

func (h *testHost) Progress(_ context.Context, f float64, note string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.progress = append(h.progress, strconv.FormatFloat(f, 'f', -1, 64)+" "+note)
	return nil
}

func (h *testHost) Partial(_ context.Context, b []byte) error {
	h.mu.Lock()
	h.partials = append(h.partials, string(b))
	h.mu.Unlock()
	select {
	case h.got <- string(b):
	default:
	}
	return nil
}

// waitPartial waits for a partial "<prefix> <n>" and returns n.
func (h *testHost) waitPartial(t testing.TB, prefix string) int {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		h.mu.Lock()
		for _, p := range h.partials {
			if rest, ok := strings.CutPrefix(p, prefix+" "); ok {
				h.mu.Unlock()
				return atoi(t, rest)
			}
		}
		h.mu.Unlock()
		select {
		case <-h.got:
		case <-deadline:
			t.Fatalf("no partial %q", prefix)
		}
	}
}

// capture is a slog.Handler that keeps records.
type capture struct {
	store *store
	attrs []slog.Attr
}

type store struct {
	mu   sync.Mutex
	recs []rec
}

type rec struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newCapture() *capture { return &capture{store: &store{}} }

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }

func (c *capture) Handle(_ context.Context, r slog.Record) error {
	m := make(map[string]string)
	for _, a := range c.attrs {
		m[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	c.store.mu.Lock()
	c.store.recs = append(c.store.recs, rec{level: r.Level, msg: r.Message, attrs: m})
	c.store.mu.Unlock()
	return nil
}

func (c *capture) WithAttrs(as []slog.Attr) slog.Handler {
	return &capture{store: c.store, attrs: append(append([]slog.Attr(nil), c.attrs...), as...)}
}

func (c *capture) WithGroup(string) slog.Handler { return c }

func (c *capture) find(msg string) []rec {
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	var out []rec
	for _, r := range c.store.recs {
		if r.msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// waitFor waits until a record with msg arrived.
func (c *capture) waitFor(t testing.TB, msg string) rec {
	t.Helper()
	var rs []rec
	testwait.For(t, 5*time.Second, fmt.Sprintf("log record %q", msg), func() bool {
		rs = c.find(msg)
		return len(rs) > 0
	})
	return rs[0]
}

// Hooks into the pool for tests and benchmarks.

// bareClient takes a warm process out of the pool and hands out its
// *pluginproto.Client, to measure a call without the pool.
func (pl *Pool) bareClient(ctx context.Context) (*pluginproto.Client, func(), error) {
	p, err := pl.acquire(ctx, "bench", "")
	if err != nil {
		return nil, nil, err
	}
	return p.task, func() { pl.release(p) }, nil
}

func (pl *Pool) privateRoot() string {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.dirs.root
}
