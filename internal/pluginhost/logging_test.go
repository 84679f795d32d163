//go:build linux

package pluginhost

import (
	"log/slog"
	"strings"
	"testing"
)

func TestParseStructured(t *testing.T) {
	for _, tc := range []struct {
		line  string
		ok    bool
		level slog.Level
		msg   string
		attrs string // "k=v k=v", sorted
	}{
		{`{"@level":"warn","@message":"disk low","@timestamp":"2026-01-01T00:00:00.000000Z","free":12}`, true, slog.LevelWarn, "disk low", "free=12"},
		{`{"@level":"trace","@message":"t","@module":"plugin.x"}`, true, levelTrace, "t", "module=plugin.x"},
		{`{"time":"2026-01-01T00:00:00.123456789Z","level":"ERROR","msg":"boom","err":"x"}`, true, slog.LevelError, "boom", "err=x"},
		{`{"level":"WARN+2","msg":"slog level"}`, true, slog.LevelWarn, "slog level", ""},
		{`{"@message":42,"@level":7,"@timestamp":1}`, true, slog.LevelInfo, "42", ""},
		{`{"@message":{"a":[1,2]}}`, true, slog.LevelInfo, `{"a":[1,2]}`, ""},
		{`{"result": 3}`, false, 0, "", ""},
		{`{"@message": "unterminated`, false, 0, "", ""},
		{`plain text`, false, 0, "", ""},
		{`{}`, false, 0, "", ""},
		{`[1,2]`, false, 0, "", ""},
	} {
		level, msg, attrs, ok := parseStructured([]byte(tc.line))
		if ok != tc.ok {
			t.Errorf("%s: ok %v", tc.line, ok)
			continue
		}
		if !ok {
			continue
		}
		var as []string
		for _, a := range attrs {
			as = append(as, a.Key+"="+a.Value.String())
		}
		if level != tc.level || msg != tc.msg || strings.Join(as, " ") != tc.attrs {
			t.Errorf("%s: got %v %q %q, want %v %q %q", tc.line, level, msg, as, tc.level, tc.msg, tc.attrs)
		}
	}
}

// lineWriter splits any chunking of a stream into the same lines, cuts
// overlong lines, levels plain lines and keeps the stderr tail.
func TestLineWriter(t *testing.T) {
	c := newCapture()
	pl := NewPool(Config{Path: "/x/plug", Logger: slog.New(c)}, 1)
	p := newProc(pl)
	w := p.stderr
	long := strings.Repeat("x", maxLineBytes+10)
	input := "one\r\n[WARN] two\n\n" + `{"@level":"error","@message":"three"}` + "\n" + long + "\npanic: oops\n\tframe\nlast"
	for i := 0; i < len(input); i += 7 { // odd-sized chunks
		w.Write([]byte(input[i:min(i+7, len(input))]))
	}
	w.flush()
	want := []struct {
		msg   string
		level slog.Level
	}{
		{"one", slog.LevelInfo},
		{"[WARN] two", slog.LevelWarn},
		{"three", slog.LevelError},
		{long[:maxLineBytes], slog.LevelInfo},
		{"xxxxxxxxxx", slog.LevelInfo},
		{"panic: oops", slog.LevelError},
		{"\tframe", slog.LevelError},
		{"last", slog.LevelError},
	}
	c.store.mu.Lock()
	recs := c.store.recs
	c.store.mu.Unlock()
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		if r.msg != want[i].msg || r.level != want[i].level || r.attrs["component"] != "plugin" || r.attrs["plugin"] != "plug" {
			t.Errorf("record %d: %v %.20q %v, want %v %.20q", i, r.level, r.msg, r.attrs, want[i].level, want[i].msg)
		}
	}
	tl := p.tail.get()
	if len(tl) != len(want) || tl[0] != "one" || len(tl[3]) > tailLineBytes+len("…") {
		t.Fatalf("tail %.40q", tl)
	}
}

func TestTailKeepsLast(t *testing.T) {
	var tl tail
	for i := range 50 {
		tl.add(strings.Repeat("a", i))
	}
	got := tl.get()
	if len(got) != tailLines || len(got[0]) != 50-tailLines || len(got[tailLines-1]) != 49 {
		t.Fatalf("tail kept %d lines, first %d long", len(got), len(got[0]))
	}
}

func TestErrorExcerpt(t *testing.T) {
	e := &Error{Op: "run", Plugin: "/p/plug", Task: "t1", PID: 9, Status: "exit status 2", Kind: ErrCrashed,
		Stderr: []string{"before", "panic: bad", "goroutine 1 [running]:", "main.f()", "\t/x.go:1", "main.main()", "\t/x.go:2", "exit"}}
	got := e.Error()
	want := `pluginhost: run task "t1": plugin crashed: plug pid 9 (exit status 2); stderr:
panic: bad
goroutine 1 [running]:
main.f()
	/x.go:1
main.main()`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func FuzzParseStructured(f *testing.F) {
	for _, s := range []string{
		`{"@level":"warn","@message":"m","k":1}`, `{"level":"INFO","msg":"m"}`,
		`{"@message":42}`, `{"@level":null}`, `{`, `plain`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, attrs, ok := parseStructured(b)
		if !ok && attrs != nil {
			t.Fatal("attrs without ok")
		}
		if len(attrs) > maxJSONAttrs {
			t.Fatalf("%d attrs", len(attrs))
		}
	})
}
