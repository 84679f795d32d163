package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/jobdb"
)

var idRe = regexp.MustCompile(`listening (\S+) name (\S+) slots \d+ id (\S+)`)

// p2pcEnv runs the binary with args and extra environment (later entries
// win) and waits up to two minutes.
func p2pcEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	p, err := harness.Start(p2pcBin, args, harness.Options{Env: env})
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(2 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckLogs(); err != nil {
		t.Fatal(err)
	}
	return result{code, p.Stdout(), p.Stderr()}
}

// waitStderr waits until p's stderr matches re.
func waitStderr(t *testing.T, p *harness.Proc, re *regexp.Regexp) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !re.MatchString(p.Stderr()) {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: waiting for %q in stderr:\n%s", p.Name, re, p.Stderr())
		case <-tick.C:
		}
	}
}

// TestSwarmSetup: init, show, join with a token, and every bad input a
// clear one-line error with exit 2 and nothing started.
func TestSwarmSetup(t *testing.T) {
	dir := t.TempDir()
	env := []string{"P2PC_SWARM=", "XDG_CONFIG_HOME=" + filepath.Join(dir, "cfg")}
	data := filepath.Join(dir, "data")

	r := p2pcEnv(t, env, "--data", data, "join", "--no-mdns")
	if r.code != 2 || !strings.Contains(r.stderr, "p2pc swarm init") || strings.Contains(r.stdout, "listening") {
		t.Fatalf("join without a secret: exit %d\n%s", r.code, r.stderr)
	}
	// A fresh machine runs a job locally, and says why no peer helps.
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(markedEchoSpec, "local"))
	r = p2pcEnv(t, env, "--data", data, "run", spec, "--out", filepath.Join(dir, "out"), "--no-progress")
	if r.code != 0 {
		t.Fatalf("local run without a secret: exit %d\n%s", r.code, r.stderr)
	}
	if harness.InPrivateNetns() && strings.Count(r.stderr, "looks for no peers") != 1 {
		t.Fatalf("local run without a secret did not say once why it looks for no peers:\n%s", r.stderr)
	}
	r = p2pcEnv(t, env, "--data", data, "swarm", "init")
	m := regexp.MustCompile(`^p2pc join --swarm (p2pc1-[a-z2-7]{58})\n$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("swarm init: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	token := m[1]
	file := filepath.Join(dir, "cfg", "p2pc", "swarm")
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v", st, err)
	}
	if r := p2pcEnv(t, env, "--data", data, "swarm", "init"); r.code != 2 || !strings.Contains(r.stderr, "already holds") {
		t.Fatalf("second init: exit %d\n%s", r.code, r.stderr)
	}
	r = p2pcEnv(t, env, "--data", data, "swarm", "show")
	if r.code != 0 || r.stdout != "p2pc join --swarm "+token+"\n" || !strings.Contains(r.stderr, "node's ID") {
		t.Fatalf("swarm show: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	// A joining machine given the token keeps it.
	env2 := []string{"P2PC_SWARM=", "XDG_CONFIG_HOME=" + filepath.Join(dir, "cfg2")}
	j, err := harness.Start(p2pcBin, []string{"--data", filepath.Join(dir, "j"), "join", "--listen", "127.0.0.1:0", "--no-mdns", "--swarm", token}, harness.Options{Name: "j", Env: env2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := j.WaitOutput(ctx, idRe); err != nil {
		t.Fatal(err)
	}
	j.Stop(5 * time.Second)
	if r := p2pcEnv(t, env2, "--data", filepath.Join(dir, "j"), "swarm", "show"); r.stdout != "p2pc join --swarm "+token+"\n" {
		t.Fatalf("the token was not kept: %q %s", r.stdout, r.stderr)
	}

	typo := []byte(token)
	typo[20] = map[bool]byte{true: 'b', false: 'a'}[typo[20] == 'a']
	loose := filepath.Join(dir, "loose")
	os.WriteFile(loose, []byte(token+"\n"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"malformed token", []string{"join", "--no-mdns", "--swarm", "p2pc1-hello"}, "characters after"},
		{"typo", []string{"join", "--no-mdns", "--swarm", string(typo)}, "checksum"},
		{"not a token", []string{"join", "--no-mdns", "--swarm", "hunter2"}, "does not start with"},
		{"loose file", []string{"--swarm-file", loose, "join", "--no-mdns"}, "chmod 600 " + loose},
		{"bad submitter", []string{"join", "--no-mdns", "--submitters", "abcd"}, "--submitters"},
		{"peers without secret", []string{"--swarm-file", filepath.Join(dir, "none"), "peers", "--no-mdns", "--join", "127.0.0.1:1"}, "p2pc swarm init"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := p2pcEnv(t, env, append([]string{"--data", data}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) || strings.Contains(r.stdout, "listening") {
				t.Fatalf("exit %d, stderr:\n%s\nwant one line with %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

// startNode starts `p2pc join` with extra environment and returns it
// with its address and node ID.
func startJoin(t *testing.T, dir, name string, env []string, extra ...string) (p *harness.Proc, addr, id string) {
	t.Helper()
	return startJoinMDNS(t, dir, name, false, env, extra...)
}

func startJoinMDNS(t *testing.T, dir, name string, mdns bool, env []string, extra ...string) (p *harness.Proc, addr, id string) {
	t.Helper()
	args := []string{"--data", filepath.Join(dir, name), "--log-level", "info", "join", "--listen", "127.0.0.1:0", "--name", name, "--slots", "2"}
	if !mdns {
		args = append(args, "--no-mdns")
	}
	args = append(args, extra...)
	p, err := harness.Start(p2pcBin, args, harness.Options{Name: name, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := p.WaitOutput(ctx, idRe)
	if err != nil {
		p.Kill()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(5 * time.Second)
		if err := p.CheckLogs(); err != nil {
			t.Error(err)
		}
	})
	return p, m[1], m[3]
}

const markedEchoSpec = `
plugin: {{repo}}/plugins/echo
params: {marker: %s}
tasks:
  - range: {param: n, from: 0, to: 15}
`

// TestStrangerGetsNothing: a node of another swarm that knows a member's
// address is refused at the handshake both ways; it runs nothing, is given
// nothing, and a job of the swarm runs on the members only, named by their
// proven IDs.
func TestStrangerGetsNothing(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	other, err := harness.NewSwarmToken()
	if err != nil {
		t.Fatal(err)
	}
	_, m1addr, m1id := startJoin(t, dir, "m1", nil)
	stranger, saddr, _ := startJoin(t, dir, "stranger", []string{"P2PC_SWARM=" + other}, "--join", m1addr)
	// The stranger tries to join through the member: its handshake fails.
	waitStderr(t, stranger, regexp.MustCompile(`not from this swarm`))

	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(markedEchoSpec, "m"))
	out := filepath.Join(dir, "out")
	r := p2pc(t, "--log-level", "info", "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", m1addr+","+saddr)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "not from this swarm") {
		t.Errorf("the submitter did not report the stranger's refused handshake:\n%s", r.stderr)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	for _, task := range rep.Tasks {
		for _, a := range task.Attempts {
			if a.Peer != "m1" || a.PeerID != m1id {
				t.Fatalf("task %s attempt on %q (%s), want m1 (%s)", task.ID, a.Peer, a.PeerID, m1id)
			}
		}
	}
	// The stranger as a submitter: no member serves it.
	sout := filepath.Join(dir, "sout")
	run, err := harness.Start(p2pcBin, []string{"--data", filepath.Join(dir, "sdata"), "--log-level", "info", "run", spec, "--out", sout, "--no-mdns", "--local-slots", "0", "--join", m1addr}, harness.Options{Name: "stranger-run", Env: []string{"P2PC_SWARM=" + other}})
	if err != nil {
		t.Fatal(err)
	}
	waitStderr(t, run, regexp.MustCompile(`not from this swarm`))
	run.Stop(5 * time.Second)
	if rep, err := jobdb.ReadReport(context.Background(), sout); err == nil && rep.Summary.Done != 0 {
		t.Fatalf("the stranger's job got %d tasks done", rep.Summary.Done)
	}
	stranger.Stop(5 * time.Second)
	if strings.Contains(stranger.Stderr(), "session") || blockFiles(t, filepath.Join(dir, "stranger", "store")) != 0 {
		t.Fatalf("the stranger took part:\n%s", stranger.Stderr())
	}
}

// blockFiles counts the block files in a store folder.
func blockFiles(t *testing.T, dir string) int {
	n := 0
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && len(d.Name()) == 64 {
			n++
		}
		return nil
	})
	return n
}

// relay copies TCP between a listener and target and keeps every byte
// it saw both ways: a passive capture on the wire.
type relay struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func startRelay(t *testing.T, target string) (string, *relay) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			cp := func(dst, src net.Conn) {
				defer wg.Done()
				io.Copy(io.MultiWriter(dst, r), src)
				dst.Close()
				src.Close()
			}
			wg.Add(2)
			go cp(s, c)
			go cp(c, s)
		}
	}()
	return l.Addr().String(), r
}

func (r *relay) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *relay) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.buf.Bytes())
}

// TestWireIsEncrypted: a capture of the coordinator's connection to a
// peer during a job (leases with params, results with inline outputs)
// holds no plaintext of them.
func TestWireIsEncrypted(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	_, maddr, _ := startJoin(t, dir, "w1", nil)
	raddr, cap := startRelay(t, maddr)
	marker := "PLAINTEXT-MARKER-7f3a9c"
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(markedEchoSpec, marker))
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--no-mdns", "--local-slots", "0", "--join", raddr)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	checkOnce(t, readReport(t, out))
	got := cap.bytes()
	if len(got) < 1000 {
		t.Fatalf("the relay saw only %d bytes: the job did not go through it", len(got))
	}
	if bytes.Contains(got, []byte(marker)) || bytes.Contains(got, []byte("marker")) {
		t.Fatalf("plaintext on the wire (%d bytes captured)", len(got))
	}
	// The outputs did carry the marker.
	found := false
	filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(marker)) && !strings.HasSuffix(path, ".json") {
				found = true
			}
		}
		return nil
	})
	if !found {
		t.Fatal("no output holds the marker: the check proves nothing")
	}
}

// TestStrangerByMDNS: inside a private network namespace, a node of
// another swarm announces itself with mDNS next to a member. The swarm's
// job runs on the member only, and the stranger is never listed.
func TestStrangerByMDNS(t *testing.T) {
	if testing.Short() {
		t.Skip("slow; TestStrangerGetsNothing (by address) and discovery's TestOtherSwarmCannotJoin cover it in -short")
	}
	if !harness.InPrivateNetns() {
		t.Skip("mDNS runs only inside a private network namespace")
	}
	dir := t.TempDir()
	other, err := harness.NewSwarmToken()
	if err != nil {
		t.Fatal(err)
	}
	_, _, m1id := startJoinMDNS(t, dir, "mm1", true, nil)
	stranger, _, _ := startJoinMDNS(t, dir, "mstranger", true, []string{"P2PC_SWARM=" + other})
	spec := writeSpec(t, dir, "e.yaml", fmt.Sprintf(markedEchoSpec, "m"))
	out := filepath.Join(dir, "out")
	r := p2pc(t, "run", spec, "--out", out, "--local-slots", "0", "--min-peers", "1")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	rep := readReport(t, out)
	checkOnce(t, rep)
	for _, task := range rep.Tasks {
		if task.Peer != "mm1" || task.PeerID != m1id {
			t.Fatalf("task %s ran on %q (%s), want mm1 (%s)", task.ID, task.Peer, task.PeerID, m1id)
		}
	}
	r = p2pc(t, "peers", "--wait", "3s")
	if r.code != 0 || !strings.Contains(r.stdout, "mm1") || !strings.Contains(r.stdout, m1id) || strings.Contains(r.stdout, "mstranger") {
		t.Fatalf("p2pc peers: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	stranger.Stop(5 * time.Second)
	if blockFiles(t, filepath.Join(dir, "mstranger", "store")) != 0 {
		t.Fatal("the stranger stored blocks of the swarm's job")
	}
}
