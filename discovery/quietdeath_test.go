package discovery_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/testwait"
)

// levels records the level of every "member failed" line.
type levels struct {
	mu   sync.Mutex
	seen []slog.Level
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levels) WithGroup(string) slog.Handler            { return l }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "member failed" {
		l.mu.Lock()
		l.seen = append(l.seen, r.Level)
		l.mu.Unlock()
	}
	return nil
}

func (l *levels) get() []slog.Level {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]slog.Level(nil), l.seen...)
}

// TestQuietDeaths: a member that stops without leaving is logged failed
// at Warn, and at Info by a member started with QuietDeaths (a
// submitter, whose job reports the peers it lost itself).
func TestQuietDeaths(t *testing.T) {
	start := func(name string, quiet bool, lv *levels) *discovery.Membership {
		ms, err := discovery.Start(context.Background(), discovery.Config{
			Name: name, BindAddr: "127.0.0.1", SecretKey: testKey, Logger: slog.New(lv),
			Timing: discovery.LoopbackTiming(), QuietDeaths: quiet,
			Meta: func() discovery.Meta { return discovery.Meta{GRPCAddr: "127.0.0.1:7000", Proto: 1} },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ms.Close() })
		return ms
	}
	loud, quiet := &levels{}, &levels{}
	a := start("a", false, loud)
	b := start("b", true, quiet)
	c := start("c", false, &levels{})
	for _, m := range []*discovery.Membership{b, c} {
		if _, err := m.Join(context.Background(), []string{a.GossipAddr()}); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 10*time.Second, "all three see each other", func() bool { return len(a.Members()) == 3 && len(b.Members()) == 3 })
	_ = c.Close() // no leave: a death
	testwait.For(t, 20*time.Second, "both log c's death", func() bool { return len(loud.get()) > 0 && len(quiet.get()) > 0 })
	if got := loud.get()[0]; got != slog.LevelWarn {
		t.Errorf("a member logs a death at %v, want WARN", got)
	}
	if got := quiet.get()[0]; got != slog.LevelInfo {
		t.Errorf("a member with QuietDeaths logs a death at %v, want INFO", got)
	}
}
