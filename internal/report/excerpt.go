package report

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Bounds of an Excerpt's detail.
const (
	ExcerptLines     = 5    // detail lines at most
	ExcerptLineBytes = 200  // each cut to this length
	ExcerptBytes     = 1024 // detail bytes at most, in all
	panicFrames      = 2    // stack frames shown after a panic
)

// taskFailedPrefix is how sdk.TaskError starts a message: the task's ID,
// which whoever shows an excerpt says anyway.
// pluginhost.Error starts with the operation and the task's ID.
var taskFailedPrefix = regexp.MustCompile(`^(task \S+ failed: |pluginhost: \w+ task "[^"]*": )`)

// Excerpt shapes an attempt's error (as Attempt.Error keeps it in full:
// a plugin's stderr, a Go panic's whole stack) for a person reading a
// summary: the headline is its first line, without the task ID that
// sdk.TaskError and pluginhost.Error repeat; detail are its last lines (at most ExcerptLines,
// ExcerptBytes in all), or for a Go panic the first frames below the
// panic's own machinery, where it happened.
func Excerpt(text string) (headline string, detail []string) {
	text = taskFailedPrefix.ReplaceAllString(strings.TrimSpace(text), "")
	lines := strings.Split(text, "\n")
	headline = strings.TrimSpace(lines[0])
	headline = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(headline, ":"), "; stderr"))
	var rest []string
	for _, l := range lines[1:] {
		if l = strings.TrimRight(l, " \t\r"); strings.TrimSpace(l) != "" {
			rest = append(rest, l)
		}
	}
	if p := panicAt(lines[0], rest); p >= 0 {
		return headline, bound(panicDetail(rest[p:]), false)
	}
	if p := panicAt("", rest); p >= 0 { // a panic in a plugin's stderr
		return headline, bound(append([]string{rest[p]}, panicDetail(rest[p+1:])...), false)
	}
	return headline, bound(rest, true)
}

// panicAt is the index in rest where the frames of a Go panic start: 0
// when the headline is the panic, else the line after the last "panic: "
// line; -1 if there is no panic.
func panicAt(headline string, rest []string) int {
	if isPanic(headline) {
		return 0
	}
	for i := len(rest) - 1; i >= 0; i-- {
		if isPanic(rest[i]) {
			return i
		}
	}
	return -1
}

func isPanic(l string) bool {
	l = strings.TrimSpace(taskFailedPrefix.ReplaceAllString(strings.TrimSpace(l), ""))
	return strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ")
}

// panicDetail picks the first frames of a stack (function line, then
// file:line) that are not the runtime's or the SDK's panic handling.
func panicDetail(stack []string) []string {
	var out []string
	for i := 0; i < len(stack) && len(out) < 2*panicFrames; i++ {
		fn := strings.TrimSpace(stack[i])
		if strings.HasPrefix(fn, "goroutine ") || strings.HasPrefix(stack[i], "\t") {
			continue
		}
		file := ""
		if i+1 < len(stack) && strings.HasPrefix(stack[i+1], "\t") {
			file = strings.TrimSpace(stack[i+1])
			i++
		}
		if machinery(fn) {
			continue
		}
		out = append(out, frameArgs.ReplaceAllString(fn, ""))
		if file != "" {
			out = append(out, "    "+frameOffset.ReplaceAllString(file, ""))
		}
	}
	return out
}

// A frame's argument words and its offset in the function say nothing to
// a reader.
var (
	frameArgs   = regexp.MustCompile(`\([^()]*\)$`)
	frameOffset = regexp.MustCompile(` \+0x[0-9a-f]+$`)
)

// machinery: a frame of the runtime's, gRPC's or the SDK's call and panic
// handling, not the plugin's own code.
func machinery(fn string) bool {
	for _, p := range []string{"runtime/debug.", "runtime.", "panic(", "github.com/p2pc/p2pc/plugins/sdk", "google.golang.org/grpc", "created by "} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// bound keeps at most ExcerptLines lines of ExcerptLineBytes each and
// ExcerptBytes in all: the last ones if last, else the first.
func bound(lines []string, last bool) []string {
	if len(lines) > ExcerptLines {
		if last {
			lines = lines[len(lines)-ExcerptLines:]
		} else {
			lines = lines[:ExcerptLines]
		}
	}
	var out []string
	total := 0
	for _, l := range lines {
		if len(l) > ExcerptLineBytes {
			i := ExcerptLineBytes
			for i > 0 && !utf8.RuneStart(l[i]) {
				i--
			}
			l = l[:i] + "…"
		}
		if total+len(l) > ExcerptBytes {
			break
		}
		total += len(l)
		out = append(out, l)
	}
	return out
}
