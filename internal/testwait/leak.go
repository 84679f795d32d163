package testwait

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// LeakWait bounds how long Main waits for goroutines to end after the
// tests: a goroutine that a test stopped may need a moment to return.
const LeakWait = 5 * time.Second

// runtimeOwned names functions whose goroutines the runtime or the testing
// package start and keep for the life of the process.
var runtimeOwned = []string{
	"testing.(*M).", "testing.RunTests", "testing.runTests", "testing.(*T).Run",
	"testing.tRunner", "testing.runFuzzing", "testing.(*F).",
	"os/signal.signal_recv", "os/signal.loop", "runtime.ensureSigM",
	"runtime.goexit0", "runtime/trace.", "runtime.ReadTrace",
}

// Main runs the tests and, if they pass, fails the binary (exit 1) when
// goroutines are still running LeakWait after them. A goroutine whose stack
// holds one of ignore (a function name, or a prefix of one) does not count:
// give each with the reason it may live on.
func Main(m *testing.M, ignore ...string) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if left := Leaked(LeakWait, ignore...); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "testwait: %d goroutine(s) still running %s after the tests:\n\n%s\n",
			len(left), LeakWait, strings.Join(left, "\n\n"))
		return 1
	}
	return 0
}

// Leaked waits up to d for every goroutine but this one, those the runtime
// owns and those matching ignore to end, and returns the stacks of those
// still running then (nil if none).
func Leaked(d time.Duration, ignore ...string) []string {
	skip := append(slices.Clip(runtimeOwned), ignore...)
	var left []string
	_ = Until(context.Background(), d, "goroutines to end", func() bool {
		left = goroutines(skip)
		return len(left) == 0
	})
	return left
}

// goroutines returns the stacks of the goroutines other than the caller's
// whose functions match none of skip.
func goroutines(skip []string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 || strings.TrimSpace(g) == "" {
			continue // the first is the caller's own
		}
		if !matches(g, skip) {
			out = append(out, g)
		}
	}
	return out
}

// matches reports whether a function of stack g starts with one of names
// (after its package path, so "grpc.(*Server).Serve" matches
// google.golang.org/grpc.(*Server).Serve).
func matches(g string, names []string) bool {
	for _, line := range strings.Split(g, "\n")[1:] {
		if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "created by ") {
			continue // a file:line, or who started it
		}
		fn := line
		if i := strings.LastIndex(fn, "/"); i >= 0 {
			fn = fn[i+1:]
		}
		for _, name := range names {
			if strings.HasPrefix(fn, name) || strings.HasPrefix(line, name) {
				return true
			}
		}
	}
	return false
}

// Snapshot is the set of goroutines running at one moment, by ID.
type Snapshot map[string]bool

// Running returns the goroutines running now.
func Running() Snapshot {
	s := Snapshot{}
	for _, g := range goroutines(nil) {
		s[goroutineID(g)] = true
	}
	return s
}

// Started waits up to d for the goroutines started after s (but this one
// and those of ignore) to end, and returns the stacks of those still
// running then.
func (s Snapshot) Started(d time.Duration, ignore ...string) []string {
	var left []string
	_ = Until(context.Background(), d, "goroutines to end", func() bool {
		left = left[:0]
		for _, g := range goroutines(ignore) {
			if !s[goroutineID(g)] {
				left = append(left, g)
			}
		}
		return len(left) == 0
	})
	return left
}

// goroutineID is the ID in a stack's first line ("goroutine 7 [...]:").
func goroutineID(g string) string {
	f := strings.Fields(g)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}
