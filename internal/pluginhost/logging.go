package pluginhost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// Plugin output reaches the host on three streams, each parsed here line
// by line (go-plugin's own stderr parser is switched off, see hcLogger):
//
//   - "stderr": the process's file descriptor 2 — the Go runtime's panic
//     and fatal-error traces, go-plugin's server log, anything a child
//     process writes, and loggers created before sdk.Serve;
//   - "stderr" via go-plugin's stdio stream: os.Stderr after sdk.Serve
//     (go-plugin redirects it over gRPC), so sdk.Logger() made in a task;
//   - "stdout" via the stdio stream: os.Stdout after sdk.Serve.
//
// A JSON object with @level/@message (hclog, sdk.Logger) or level/msg
// (slog) becomes a record at that level with its other keys as
// attributes; other lines become records at Info (stderr) or Debug
// (stdout), except "[WARN] ..."-style prefixes and Go panics (Error).
const (
	maxLineBytes  = 64 << 10 // longer lines are cut into pieces
	tailLines     = 20       // stderr lines kept for error reports
	tailLineBytes = 512      // each cut to this length
	maxJSONAttrs  = 32       // attributes kept from one JSON line
	levelTrace    = slog.LevelDebug - 4
)

// tail keeps a process's last stderr lines.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == tailLines {
		copy(t.lines, t.lines[1:])
		t.lines = t.lines[:tailLines-1]
	}
	t.lines = append(t.lines, clip(line, tailLineBytes))
}

func (t *tail) get() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lines)
}

// lineWriter turns one output stream of a plugin into log records.
type lineWriter struct {
	p      *proc
	stream string
	plain  slog.Level // level of a line that says nothing of its own
	keep   bool       // add lines to the process's stderr tail

	mu      sync.Mutex
	buf     []byte
	inPanic bool
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.buf = append(w.buf, b...)
			for len(w.buf) >= maxLineBytes {
				w.emit(w.buf[:maxLineBytes])
				w.buf = append(w.buf[:0], w.buf[maxLineBytes:]...)
			}
			break
		}
		line := b[:i]
		if len(w.buf) > 0 {
			w.buf = append(w.buf, line...)
			line = w.buf
		}
		for len(line) > maxLineBytes {
			w.emit(line[:maxLineBytes])
			line = line[maxLineBytes:]
		}
		w.emit(line)
		w.buf = w.buf[:0]
		b = b[i+1:]
	}
	return n, nil
}

// flush emits an unterminated last line.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
}

func (w *lineWriter) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if w.keep {
		w.p.tail.add(string(line))
	}
	level, msg, attrs, ok := parseStructured(line)
	if !ok {
		level, msg = w.plainLevel(string(line)), string(line)
	}
	l := w.p.pool.plugLog
	if !l.Enabled(context.Background(), level) {
		return
	}
	attrs = append(attrs, slog.Int("pid", w.p.pidValue()), slog.String("stream", w.stream))
	l.LogAttrs(context.Background(), level, msg, attrs...)
}

func (w *lineWriter) plainLevel(line string) slog.Level {
	switch {
	case strings.HasPrefix(line, "[TRACE]"):
		return levelTrace
	case strings.HasPrefix(line, "[DEBUG]"):
		return slog.LevelDebug
	case strings.HasPrefix(line, "[INFO]"):
		return slog.LevelInfo
	case strings.HasPrefix(line, "[WARN]"):
		return slog.LevelWarn
	case strings.HasPrefix(line, "[ERROR]"):
		return slog.LevelError
	case strings.HasPrefix(line, "panic: "), strings.HasPrefix(line, "fatal error: "):
		w.inPanic = true // the stack trace that follows is part of it
		return slog.LevelError
	case w.inPanic:
		return slog.LevelError
	}
	return w.plain
}

// parseStructured reads a JSON log line: hclog's and sdk.Logger's
// @level/@message/@timestamp, or slog's level/msg/time. It never fails
// on odd types (go-plugin's own parser panics on a non-string @message,
// which would let a plugin crash the host).
func parseStructured(line []byte) (slog.Level, string, []slog.Attr, bool) {
	line = bytes.TrimSpace(line)
	if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' {
		return 0, "", nil, false
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return 0, "", nil, false
	}
	lv, hasLevel := take(m, "@level", "level")
	msg, hasMsg := take(m, "@message", "msg", "message")
	if !hasLevel && !hasMsg {
		return 0, "", nil, false
	}
	level := slog.LevelInfo
	if hasLevel {
		level = parseLevel(fmt.Sprint(lv))
	}
	text := ""
	if hasMsg {
		if s, ok := msg.(string); ok {
			text = s
		} else {
			b, _ := json.Marshal(msg)
			text = string(b)
		}
	}
	take(m, "@timestamp", "time", "timestamp") // the host stamps its own records
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > maxJSONAttrs {
		keys = keys[:maxJSONAttrs]
	}
	attrs := make([]slog.Attr, 0, len(keys)+2)
	for _, k := range keys {
		v := m[k]
		if n, ok := v.(json.Number); ok {
			v = n.String()
		}
		attrs = append(attrs, slog.Any(strings.TrimPrefix(k, "@"), v))
	}
	return level, text, attrs, true
}

// take removes and returns the first of keys present in m.
func take(m map[string]any, keys ...string) (any, bool) {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			delete(m, k)
			return v, true
		}
	}
	return nil, false
}

func parseLevel(s string) slog.Level {
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case strings.HasPrefix(s, "trace"):
		return levelTrace
	case strings.HasPrefix(s, "debug"):
		return slog.LevelDebug
	case strings.HasPrefix(s, "warn"):
		return slog.LevelWarn
	case strings.HasPrefix(s, "err"), strings.HasPrefix(s, "fatal"),
		strings.HasPrefix(s, "panic"), strings.HasPrefix(s, "crit"):
		return slog.LevelError
	}
	return slog.LevelInfo
}

// hcLogger is the hclog.Logger go-plugin gets. It forwards go-plugin's own
// messages to slog at Debug (the pool reports what matters itself; Trace
// is dropped), and
// it is Off for the sub-logger go-plugin names after the plugin: go-plugin
// then skips parsing stderr and only copies the raw lines to
// ClientConfig.Stderr, where lineWriter parses them.
type hcLogger struct {
	l    *slog.Logger
	name string
	mute string // sub-logger name to switch off
	off  bool
	args []any
}

var _ hclog.Logger = (*hcLogger)(nil)

func (h *hcLogger) Log(level hclog.Level, msg string, args ...any) {
	if level <= hclog.Trace || !h.enabled() { // go-plugin traces every stdio chunk
		return
	}
	all := make([]any, 0, len(h.args)+len(args)+4)
	all = append(all, "go_plugin", h.name, "go_plugin_level", level.String())
	all = append(all, h.args...)
	all = append(all, args...)
	h.l.Debug(msg, all...)
}

func (h *hcLogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hcLogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hcLogger) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hcLogger) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hcLogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hcLogger) enabled() bool {
	return !h.off && h.l.Enabled(context.Background(), slog.LevelDebug)
}

func (h *hcLogger) IsTrace() bool { return false }
func (h *hcLogger) IsDebug() bool { return h.enabled() }
func (h *hcLogger) IsInfo() bool  { return h.enabled() }
func (h *hcLogger) IsWarn() bool  { return h.enabled() }
func (h *hcLogger) IsError() bool { return h.enabled() }

func (h *hcLogger) ImpliedArgs() []any { return h.args }

func (h *hcLogger) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(slices.Clip(h.args), args...)
	return &c
}

func (h *hcLogger) Name() string { return h.name }

func (h *hcLogger) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	if name == h.mute {
		c.off = true
	}
	return &c
}

func (h *hcLogger) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	c.off = h.off || name == h.mute
	return &c
}

func (h *hcLogger) SetLevel(hclog.Level) {}

func (h *hcLogger) GetLevel() hclog.Level {
	if h.off {
		return hclog.Off
	}
	return hclog.Trace
}

func (h *hcLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hcLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		h.Debug(strings.TrimRight(string(b), "\n"))
		return len(b), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
