package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/plugins/sdk"
	"github.com/p2pc/p2pc/plugins/sdk/sdktest"
)

// newEcho returns an echo whose exit records the status instead of
// exiting (Run then returns an error), and -1 until it is called.
func newEcho() (*echo, *int) {
	status := -1
	return &echo{exit: func(code int) { status = code }}, &status
}

func newTask() *echo {
	e, _ := newEcho()
	return e
}

func TestEcho(t *testing.T) {
	tests := []struct {
		name     string
		params   string
		attempt  int
		data     string // want this data, unless empty
		size     int    // want this many bytes of data, if > 0
		partials []string
		err      string // want an error mentioning this
		crash    bool
	}{
		{name: "empty", params: `{}`, data: `{}`},
		{name: "verbatim", params: "{ \"b\": [1, 2],\n  \"a\": \"x\"  }", data: "{ \"b\": [1, 2],\n  \"a\": \"x\"  }"},
		{name: "unknown keys", params: `{"i":7,"z":{"y":null}}`, data: `{"i":7,"z":{"y":null}}`},
		{name: "sleep", params: `{"sleep_ms":20}`, data: `{"sleep_ms":20}`},
		{name: "partials", params: `{"partials":3,"sleep_ms":6}`, data: `{"partials":3,"sleep_ms":6}`,
			partials: []string{`{"partial":1,"of":3}`, `{"partial":2,"of":3}`, `{"partial":3,"of":3}`}},
		{name: "partials without sleep", params: `{"partials":2}`, data: `{"partials":2}`,
			partials: []string{`{"partial":1,"of":2}`, `{"partial":2,"of":2}`}},
		{name: "fail", params: `{"fail":true}`, err: "echo: failing as asked"},
		{name: "fail false", params: `{"fail":false}`, data: `{"fail":false}`},
		{name: "crash", params: `{"crash":true}`, crash: true},
		{name: "crash later attempt", params: `{"crash":true}`, attempt: 5, crash: true},
		{name: "crash first attempts", params: `{"crash_attempts":2}`, attempt: 1, crash: true},
		{name: "retry succeeds", params: `{"crash_attempts":2}`, attempt: 2, data: `{"crash_attempts":2}`},
		{name: "crash_attempts bounds crash", params: `{"crash":true,"crash_attempts":1}`, attempt: 1, data: `{"crash":true,"crash_attempts":1}`},
		{name: "crash before fail", params: `{"crash":true,"fail":true}`, crash: true},
		{name: "output bytes", params: `{"output_bytes":1000}`, size: 1000},
		{name: "output bytes odd", params: `{"output_bytes":13,"x":1}`, size: 13},
		{name: "fail before output", params: `{"output_bytes":10,"fail":true}`, err: "failing as asked"},
		{name: "negative sleep", params: `{"sleep_ms":-1}`, err: "sleep_ms is -1, must not be negative"},
		{name: "negative output", params: `{"output_bytes":-5}`, err: "output_bytes is -5"},
		{name: "huge output", params: `{"output_bytes":1e12}`, err: "decode params"},
		{name: "too much output", params: fmt.Sprintf(`{"output_bytes":%d}`, MaxOutputBytes+1), err: "at most"},
		{name: "wrong type", params: `{"fail":"yes"}`, err: "decode params"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, crashed := newEcho()
			out, err := sdktest.RunRequest(context.Background(), task, &sdk.Request{TaskID: "t", Attempt: tt.attempt, Params: json.RawMessage(tt.params)})
			if out != nil {
				defer out.Cleanup()
			}
			if tt.crash {
				if *crashed != CrashStatus {
					t.Fatalf("exit status %d, want %d (err %v)", *crashed, CrashStatus, err)
				}
				return
			}
			if *crashed != -1 {
				t.Fatalf("crashed with status %d", *crashed)
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			data := out.Files[sdk.DataFile]
			if tt.data != "" && string(data) != tt.data {
				t.Errorf("data = %q, want %q", data, tt.data)
			}
			if tt.size > 0 && len(data) != tt.size {
				t.Errorf("%d bytes of data, want %d", len(data), tt.size)
			}
			var got []string
			for _, p := range out.Partials {
				got = append(got, string(p))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.partials) {
				t.Errorf("partials = %q, want %q", got, tt.partials)
			}
		})
	}
}

func TestFailIsTaskError(t *testing.T) {
	_, err := sdktest.Run(context.Background(), newTask(), map[string]bool{"fail": true})
	if !errors.Is(err, errFail) {
		t.Errorf("err = %v", err)
	}
}

func TestSleepHonoursCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := sdktest.Run(ctx, newTask(), map[string]int{"sleep_ms": 60_000, "partials": 3})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %v", d)
	}
}

func TestSleepLasts(t *testing.T) {
	start := time.Now()
	out, err := sdktest.Run(context.Background(), newTask(), map[string]int{"sleep_ms": 50, "partials": 4})
	if err != nil {
		t.Fatal(err)
	}
	out.Cleanup()
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("slept %v, want at least 50ms", d)
	}
}

func TestPseudoRandom(t *testing.T) {
	a := pseudoRandom(4096, []byte(`{"i":1}`))
	if !bytes.Equal(a, pseudoRandom(4096, []byte(`{"i":1}`))) {
		t.Error("not deterministic")
	}
	if bytes.Equal(a, pseudoRandom(4096, []byte(`{"i":2}`))) {
		t.Error("same bytes for different params")
	}
	if !bytes.Equal(pseudoRandom(13, []byte("x")), pseudoRandom(16, []byte("x"))[:13]) {
		t.Error("a shorter output is not a prefix of a longer one")
	}
	// Pinned, so that a change of the stream (which would change every
	// benchmark's digests) is deliberate. Integer arithmetic only: the same
	// on every GOARCH.
	sum := sha256.Sum256(pseudoRandom(1000, []byte(`{}`)))
	if got, want := hex.EncodeToString(sum[:]), goldenStream; got != want {
		t.Errorf("sha256 of the stream = %s, want %s", got, want)
	}
}

const goldenStream = "aa6e6a34cd07d6b2e1fdc7713533873b2c92cc054cfa782c3162de732e1f5b5a"

func TestConformance(t *testing.T) {
	sdktest.Conformance(t, newTask(),
		sdktest.Case{Name: "empty"},
		sdktest.Case{Name: "params", Params: map[string]any{"i": 3, "name": "x"}},
		sdktest.Case{Name: "sleep and partials", Params: map[string]int{"sleep_ms": 200, "partials": 2}},
		sdktest.Case{Name: "output", Params: map[string]int{"output_bytes": 1 << 20}},
	)
}

func TestDescribe(t *testing.T) {
	if info := newTask().Describe(); info.Name != "echo" || !info.Portable {
		t.Errorf("info = %+v", info)
	}
}

func BenchmarkEcho(b *testing.B) {
	task := newTask()
	req := &sdk.Request{Params: json.RawMessage(`{"i":1}`), WorkDir: b.TempDir()}
	host := nopHost{}
	for b.Loop() {
		if _, err := task.Run(context.Background(), req, host); err != nil {
			b.Fatal(err)
		}
	}
}

type nopHost struct{ sdk.UnsupportedHost }

func (nopHost) Progress(context.Context, float64, string) error { return nil }
func (nopHost) Partial(context.Context, []byte) error           { return nil }
