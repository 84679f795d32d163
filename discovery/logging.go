package discovery

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"strings"
	"sync"
)

// stdLogger returns a *log.Logger (what memberlist and mdns take) whose
// lines go to l: a line "[LEVEL] lib: message" becomes a record at the
// matching slog level with the "[LEVEL] lib: " prefix removed. hook, if
// not nil, sees every message (after the prefix is removed) first, and
// drops it by returning false.
func stdLogger(l *slog.Logger, hook func(level slog.Level, msg string) bool) *log.Logger {
	return log.New(&logWriter{log: l, hook: hook}, "", 0)
}

// logWriter parses what a *log.Logger writes. log.Logger serializes its
// writes and writes one whole line per call; a partial line is kept until
// its end arrives.
type logWriter struct {
	log  *slog.Logger
	hook func(level slog.Level, msg string) bool

	mu   sync.Mutex
	rest []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.rest = append(w.rest, p...)
	var lines []string
	for {
		i := bytes.IndexByte(w.rest, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, string(w.rest[:i]))
		w.rest = w.rest[i+1:]
	}
	if len(w.rest) == 0 {
		w.rest = nil
	}
	w.mu.Unlock()
	for _, line := range lines {
		w.emit(line)
	}
	return len(p), nil
}

func (w *logWriter) emit(line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	level, msg := parseLogLine(line)
	if w.hook != nil && !w.hook(level, msg) {
		return
	}
	w.log.Log(context.Background(), level, msg)
}

// parseLogLine splits "[WARN] memberlist: text" into (slog.LevelWarn,
// "text"). Lines without a level tag are INFO, except the few memberlist
// writes as "Err: ...".
func parseLogLine(line string) (slog.Level, string) {
	level := slog.LevelInfo
	if strings.HasPrefix(line, "[") {
		if end := strings.IndexByte(line, ']'); end > 0 {
			switch strings.ToUpper(line[1:end]) {
			case "TRACE", "DEBUG":
				level = slog.LevelDebug
			case "INFO":
				level = slog.LevelInfo
			case "WARN", "WARNING":
				level = slog.LevelWarn
			case "ERR", "ERROR":
				level = slog.LevelError
			}
			line = strings.TrimSpace(line[end+1:])
		}
	} else if rest, ok := strings.CutPrefix(line, "Err: "); ok {
		level, line = slog.LevelError, rest
	}
	for _, lib := range []string{"memberlist: ", "mdns: "} {
		line = strings.TrimPrefix(line, lib)
	}
	return level, line
}

// orDiscard returns l, or a logger that drops everything if l is nil.
func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
