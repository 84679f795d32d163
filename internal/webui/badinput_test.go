package webui

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

func TestBadRequests(t *testing.T) {
	out := t.TempDir()
	job := newFakeJob(5)
	// A done task whose files the report lists, and a secret beside it.
	png := append([]byte(nil), pngMagic...)
	os.MkdirAll(filepath.Join(out, "tasks", "000001"), 0o755)
	os.WriteFile(filepath.Join(out, "tasks", "000001", "img.png"), append(png, 1, 2, 3), 0o644)
	os.WriteFile(filepath.Join(out, "tasks", "000001", "fake.png"), []byte("not a png"), 0o644)
	os.WriteFile(filepath.Join(out, "secret.png"), append(png, 9), 0o644)
	job.rep.Tasks[1].State = report.TaskDone
	job.rep.Tasks[1].Files = []string{"tasks/000001/img.png", "tasks/000001/fake.png", "tasks/000001/../../secret.png"}
	base, _ := serve(t, "127.0.0.1:0", Config{Job: job, OutDir: out, Tokens: []string{testToken}})
	addr := strings.TrimPrefix(base, "http://")

	cases := []struct {
		path string
		want int
	}{
		{"/assets/app.js", 200},
		{"/api/file?task=000001&name=img.png", 200},
		{"/assets/../webui.go", 404},
		{"/assets/..%2fwebui.go", 404},
		{"/assets/%2e%2e/hub.go", 404},
		{"/assets/..%5cwebui.go", 404},
		{"/assets//etc/passwd", 404},
		{"/assets/", 404},
		{"/../../etc/passwd", 404},
		{"/webui.go", 404},
		{"/api/file?task=000001&name=fake.png", 404},
		{"/api/file?task=000001&name=secret.png", 404},
		{"/api/file?task=000001&name=../../secret.png", 404},
		{"/api/file?task=../..&name=secret.png", 404},
		{"/api/file?task=000002&name=img.png", 404},
		{"/api/file?task=000001&name=%00.png", 404},
		{"/api/tasks?state=bogus", 400},
		{"/api/tasks?offset=-1", 400},
		{"/api/tasks?limit=abc", 400},
		{"/api/tasks?limit=0", 400},
		{"/api/tasks?offset=99999999999999999999", 400},
		{"/api/tasks?offset=1000000&limit=1000000", 200},
		{"/api/tasks?state=" + strings.Repeat("x", 8000), 400},
		{"/api/nothing", 404},
	}
	for _, c := range cases {
		req, _ := http.NewRequest("GET", base+c.path, nil)
		code, body, resp := get(t, req)
		if code == http.StatusTemporaryRedirect && c.want == 404 {
			// The mux cleans "..", "//": the clean path must not serve either.
			loc := resp.Header.Get("Location")
			req, _ := http.NewRequest("GET", base+loc, nil)
			code, body, resp = get(t, req)
		}
		if code != c.want {
			t.Errorf("GET %s: %d, want %d (%q)", c.path, code, c.want, body)
		}
		if strings.Contains(body, "package webui") || strings.Contains(body, "root:") || (code == 200 && strings.Contains(c.path, "secret")) {
			t.Errorf("GET %s served what it should not: %q", c.path, body)
		}
		if ct := resp.Header.Get("X-Content-Type-Options"); ct != "nosniff" {
			t.Errorf("GET %s: no nosniff header", c.path)
		}
	}
	// Malformed and oversized requests on the wire.
	for name, c := range map[string]struct{ data, want string }{
		"garbage":        {"GARBAGE\r\n\r\n", "HTTP/1.1 400"},
		"bad version":    {"GET / HTTP/9.9\r\nHost: x\r\n\r\n", "HTTP/1.1 505"},
		"no host":        {"GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 400"},
		"huge header":    {"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n", "HTTP/1.1 431"},
		"huge url":       {"GET /?" + strings.Repeat("a", 64<<10) + " HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 431"},
		"bad method":     {"DELETE /api/cancel HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 405"},
		"bad chunk body": {"POST /api/cancel HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "HTTP/1.1 401"},
	} {
		if got := rawRequest(t, addr, c.data); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
	// A body far beyond the limit on an action.
	req, _ := http.NewRequest("POST", base+"/api/cancel", strings.NewReader(strings.Repeat("x", 8<<20)))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("X-P2PC-UI", "1")
	if code, _, _ := get(t, req); code != http.StatusNotFound { // no Cancel configured
		t.Errorf("big POST: %d", code)
	}
	// Still serving.
	req, _ = http.NewRequest("GET", base+"/api/snapshot", nil)
	if code, _, _ := get(t, req); code != 200 {
		t.Fatalf("after bad input: %d", code)
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(es)
}

// TestThousandStreams opens 1,000 event streams at once: each gets the
// snapshot; after they close, the file descriptors are back where they
// were, and the server still answers.
func TestThousandStreams(t *testing.T) {
	const n = 1000
	job := newFakeJob(100_000)
	base, _ := serve(t, "127.0.0.1:0", Config{Job: job, Swarm: fakeSwarm{{Name: "p1", Slots: 4}}, Every: 50 * time.Millisecond})
	addr := strings.TrimPrefix(base, "http://")
	before := openFDs(t)

	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial after %d streams: %v", len(conns), err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		r := bufio.NewReader(c)
		got := false
		for !got {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				m, err := decodeEvent(data)
				if err != nil || m["job"] == nil {
					t.Fatalf("stream %d: event %q: %v", i, data, err)
				}
				got = true
			}
		}
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
	during := openFDs(t)
	if during < before+n {
		t.Fatalf("fds: %d before, %d with %d streams open", before, during, n)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	// The server notices each close at its next write (an update or the
	// keep-alive); make updates happen, and wait for the fds to go.
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		job.mu.Lock()
		job.rep.Summary.Done = i % 100 // a change: every stream gets written to
		job.mu.Unlock()
		now := openFDs(t)
		if now <= before+2 {
			t.Logf("fds: %d before, %d with %d streams, %d after", before, during, n, now)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fds: %d before, %d after closing %d streams (leak)", before, now, n)
		}
		<-tick.C
	}
	req, _ := http.NewRequest("GET", base+"/api/tasks?limit=3", nil)
	if code, body, _ := get(t, req); code != 200 || !strings.Contains(body, `"total":100000`) {
		t.Fatalf("after the streams: %d %q", code, body)
	}
}
