package webui

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/p2pc/p2pc/harness"
)

const testToken = "p2pcui-testtoken"

// lanAddr gives this test's private network namespace a veth pair with
// a non-loopback address and returns it.
func lanAddr(t *testing.T) string {
	t.Helper()
	harness.RequirePrivateNetns(t)
	const ip = "10.77.0.1"
	if _, err := net.Listen("tcp", ip+":0"); err == nil {
		return ip
	}
	for _, args := range [][]string{
		{"link", "add", "wv0", "type", "veth", "peer", "name", "wv1"},
		{"addr", "add", ip + "/24", "dev", "wv0"},
		{"link", "set", "wv0", "up"},
		{"link", "set", "wv1", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Skipf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return ip
}

func get(t *testing.T, req *http.Request) (int, string, *http.Response) {
	t.Helper()
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body), resp
}

func TestOffLoopbackNeedsToken(t *testing.T) {
	ip := lanAddr(t)
	if IsLoopback(ip + ":1") {
		t.Fatalf("%s counted as loopback", ip)
	}
	if _, err := New(Config{}).Listen(ip + ":0"); err == nil {
		t.Fatal("a non-loopback address without tokens was accepted")
	}
	var cancelled atomic.Int32
	base, _ := serve(t, ip+":0", Config{Job: newFakeJob(10), Swarm: fakeSwarm{{Name: "p1"}}, Tokens: []string{testToken},
		Cancel: func() { cancelled.Add(1) }})

	// Nothing without a token, whatever the path.
	for _, path := range []string{"/", "/assets/app.js", "/api/events", "/api/snapshot", "/api/tasks", "/api/access", "/api/file?task=000001&name=a.png", "/?token=wrong", "/api/snapshot?token=" + testToken + "x"} {
		req, _ := http.NewRequest("GET", base+path, nil)
		code, body, _ := get(t, req)
		if code != http.StatusUnauthorized || strings.Contains(body, "<html") || strings.Contains(body, "fake") {
			t.Errorf("GET %s without a token: %d %q", path, code, body)
		}
	}
	req, _ := http.NewRequest("GET", base+"/api/snapshot", nil)
	req.AddCookie(&http.Cookie{Name: cookieName, Value: "p2pcui-forged"})
	if code, _, _ := get(t, req); code != http.StatusUnauthorized {
		t.Errorf("forged cookie: %d", code)
	}

	// The token URL sets the cookie and sends the browser to "/".
	req, _ = http.NewRequest("GET", base+"/?token="+testToken, nil)
	code, _, resp := get(t, req)
	if code != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("token URL: %d to %q", code, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value != testToken || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("token URL set cookie %+v", cookie)
	}
	for _, auth := range []func(*http.Request){
		func(r *http.Request) { r.AddCookie(cookie) },
		func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken) },
	} {
		req, _ := http.NewRequest("GET", base+"/api/snapshot", nil)
		auth(req)
		if code, body, _ := get(t, req); code != http.StatusOK || !strings.Contains(body, `"fake"`) {
			t.Errorf("with a token: %d %q", code, body)
		}
	}

	// Acting: the token and the header, by POST only.
	for _, c := range []struct {
		name   string
		method string
		token  bool
		header bool
		want   int
	}{
		{"no token", "POST", false, true, http.StatusUnauthorized},
		{"no header", "POST", true, false, http.StatusForbidden},
		{"GET", "GET", true, true, http.StatusMethodNotAllowed},
		{"ok", "POST", true, true, http.StatusOK},
	} {
		req, _ := http.NewRequest(c.method, base+"/api/cancel", nil)
		if c.token {
			req.AddCookie(cookie)
		}
		if c.header {
			req.Header.Set("X-P2PC-UI", "1")
		}
		if code, body, _ := get(t, req); code != c.want {
			t.Errorf("cancel, %s: %d %q, want %d", c.name, code, body, c.want)
		}
	}
	if n := cancelled.Load(); n != 1 {
		t.Errorf("cancel ran %d times, want once", n)
	}
}

func TestLoopbackReadsOpenActsNeedToken(t *testing.T) {
	var cancelled atomic.Int32
	base, _ := serve(t, "127.0.0.1:0", Config{Job: newFakeJob(3), Tokens: []string{testToken}, Cancel: func() { cancelled.Add(1) }})
	req, _ := http.NewRequest("GET", base+"/", nil)
	if code, body, resp := get(t, req); code != 200 || !strings.Contains(body, "/assets/app.js") || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("page on loopback: %d", code)
	}
	req, _ = http.NewRequest("GET", base+"/api/access", nil)
	if _, body, _ := get(t, req); !strings.Contains(body, `"act":false`) {
		t.Errorf("access without token: %s", body)
	}
	req, _ = http.NewRequest("POST", base+"/api/cancel", nil)
	req.Header.Set("X-P2PC-UI", "1")
	if code, _, _ := get(t, req); code != http.StatusUnauthorized || cancelled.Load() != 0 {
		t.Errorf("cancel without a token on loopback: %d, cancelled %d", code, cancelled.Load())
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7480": true, "127.0.0.2:1": true, "[::1]:1": true, "localhost:1": true,
		"0.0.0.0:7480": false, ":7480": false, "10.0.0.1:1": false, "[::]:1": false, "example.com:1": false, "127.0.0.1": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %t, want %t", addr, got, want)
		}
	}
}

// rawRequest sends data on a fresh connection and returns the status line.
func rawRequest(t *testing.T, addr, data string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, data); err != nil {
		return "write: " + err.Error()
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "read: " + err.Error()
	}
	return strings.TrimSpace(line)
}
