package transfer_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
	"github.com/p2pc/p2pc/internal/testwait"
	"github.com/p2pc/p2pc/internal/transfer"
)

// The tests in this file run real p2pc processes: `blocks put` into three
// data directories, three `blocks serve`, and `blocks get` fetching from
// them. They build ./cmd/p2pc once per test binary.

var (
	p2pcOnce sync.Once
	p2pcBin  string
	p2pcErr  error
	p2pcDir  string
)

func TestMain(m *testing.M) {
	// The p2pc processes the tests start are members of one fresh swarm;
	// nothing is written to the user's config folder.
	cfg, err := os.MkdirTemp("", "p2pc-swarm-")
	if err != nil {
		panic(err)
	}
	if _, err := harness.UseTestSwarm(cfg); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(cfg)
	if p2pcDir != "" {
		os.RemoveAll(p2pcDir)
	}
	os.Exit(code)
}

// buildP2PC builds the p2pc command, or skips the test if it does not
// build (the CLI is assembled by several packages at once).
func buildP2PC(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("real-process test; skipped in -short mode")
	}
	p2pcOnce.Do(func() {
		p2pcDir, p2pcErr = os.MkdirTemp("", "p2pc-transfer-test-")
		if p2pcErr != nil {
			return
		}
		p2pcBin = filepath.Join(p2pcDir, "p2pc")
		// The fault tag: the tests use blocks serve's --fault-* flags.
		args := []string{"build", "-o", p2pcBin, "-tags", harness.FaultTag}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/p2pc/p2pc/cmd/p2pc")...).CombinedOutput()
		if err != nil {
			p2pcErr = fmt.Errorf("go build ./cmd/p2pc: %v\n%s", err, out)
		}
	})
	if p2pcErr != nil {
		t.Skipf("cannot build p2pc, skipping the real-process tests: %v", p2pcErr)
	}
	return p2pcBin
}

// proc is a running p2pc process.
type proc struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startProc starts bin with args; stdout goes to stdout (if non-nil).
func startProc(t *testing.T, name string, stdout io.Writer, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout = stdout
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		defer close(p.done)
		p.err = p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.stop()
		p.checkLogs()
	})
	return p
}

// stop sends SIGTERM and waits (then SIGKILL after 10s).
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// wait waits for the process to exit by itself and fails the test if it
// does not exit 0.
func (p *proc) wait(d time.Duration) {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.kill()
		p.t.Fatalf("%s did not finish in %v; stderr:\n%s", p.name, d, p.stderr)
	}
	if p.err != nil {
		p.t.Fatalf("%s: %v; stderr:\n%s", p.name, p.err, p.stderr)
	}
}

func (p *proc) checkLogs() {
	p.t.Helper()
	s := p.stderr.String()
	for _, bad := range []string{"panic:", "DATA RACE", "fatal error:"} {
		if strings.Contains(s, bad) {
			p.t.Errorf("%s log contains %q:\n%s", p.name, bad, s)
		}
	}
}

// server is a running `p2pc blocks serve`.
type server struct {
	*proc
	addr string
}

func startServe(t *testing.T, bin, data string, extra ...string) *server {
	t.Helper()
	pr, pw := io.Pipe()
	args := append([]string{"--data", data, "--log-level", "info", "blocks", "serve", "--listen", "127.0.0.1:0"}, extra...)
	p := startProc(t, "serve "+filepath.Base(data), pw, bin, args...)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() { pw.Close() })
	select {
	case line := <-lines:
		addr, ok := strings.CutPrefix(line, "listening ")
		if !ok {
			t.Fatalf("serve printed %q, want \"listening ADDR\"", line)
		}
		return &server{proc: p, addr: addr}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not print its address; stderr:\n%s", p.stderr)
	}
	return nil
}

// run runs a p2pc command to completion and returns its stdout.
func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	p := startProc(t, strings.Join(args, " "), &out, bin, args...)
	p.wait(5 * time.Minute)
	return out.String()
}

func readStats(t *testing.T, path string) *transfer.FetchStats {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st transfer.FetchStats
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("stats %s: %v", path, err)
	}
	return &st
}

// countBlocks counts the block files in a data directory's store.
func countBlocks(data string) int {
	n := 0
	fans, _ := filepath.Glob(filepath.Join(data, "store", "blocks", "*"))
	for _, f := range fans {
		es, _ := os.ReadDir(f)
		for _, e := range es {
			if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
				n++
			}
		}
	}
	return n
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	out, err := exec.Command("cmp", a, b).CombinedOutput()
	if err != nil {
		t.Fatalf("%s and %s differ: %v %s", a, b, err, out)
	}
}

func TestProcesses(t *testing.T) {
	bin := buildP2PC(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src.bin")
	const size = 256 << 20
	if err := os.WriteFile(src, randomData(42, size), 0o644); err != nil {
		t.Fatal(err)
	}

	// Three holders, populated with `blocks put` (in parallel).
	holders := []string{filepath.Join(dir, "h1"), filepath.Join(dir, "h2"), filepath.Join(dir, "h3")}
	var puts []*proc
	var outs []*bytes.Buffer
	for _, h := range holders {
		var out bytes.Buffer
		puts = append(puts, startProc(t, "put "+filepath.Base(h), &out, bin, "--data", h, "blocks", "put", src))
		outs = append(outs, &out)
	}
	var id string
	for i, p := range puts {
		p.wait(5 * time.Minute)
		got := strings.TrimSpace(outs[i].String())
		if id != "" && got != id {
			t.Fatalf("put printed %q and %q", id, got)
		}
		id = got
	}
	if len(id) != 64 {
		t.Fatalf("put printed %q, want a file ID", id)
	}

	// Cap each holder's uplink so that the fetch takes a few seconds and
	// a kill lands in its middle.
	rate := []string{"--rate-limit", "32MiB"}
	var srvs []*server
	for _, h := range holders {
		srvs = append(srvs, startServe(t, bin, h, rate...))
	}
	from := func() string {
		var a []string
		for _, s := range srvs {
			a = append(a, s.addr)
		}
		return strings.Join(a, ",")
	}

	t.Run("three sources", func(t *testing.T) {
		data, out, stats := filepath.Join(dir, "g1"), filepath.Join(dir, "out1"), filepath.Join(dir, "stats1.json")
		run(t, bin, "--data", data, "blocks", "get", id, "--from", from(), "-o", out, "--stats-json", stats)
		sameFile(t, src, out)
		st := readStats(t, stats)
		if st.Blocks != 256 || st.Fetched != 256 || st.Present != 0 {
			t.Errorf("stats: %+v", st)
		}
		for _, s := range srvs {
			ps := st.Peers[s.addr]
			if ps == nil || ps.Blocks == 0 || ps.Banned {
				t.Errorf("source %s: %+v", s.addr, ps)
			}
			t.Logf("source %s served %d blocks", s.addr, ps.Blocks)
		}
		// The fetched file is pinned and complete in the store.
		if ls := run(t, bin, "--data", data, "blocks", "ls"); !strings.Contains(ls, id) || !strings.Contains(ls, "complete") {
			t.Errorf("ls: %q", ls)
		}
		if v := run(t, bin, "--data", data, "blocks", "verify"); !strings.Contains(v, "257 blocks ok") {
			t.Errorf("verify: %q", v)
		}
	})

	t.Run("corrupt source", func(t *testing.T) {
		bad := srvs[2]
		bad.stop()
		srvs[2] = startServe(t, bin, holders[2], append(rate, "--fault-corrupt")...)
		defer func() {
			srvs[2].stop()
			srvs[2] = startServe(t, bin, holders[2], rate...)
		}()
		// stderr is copied by a goroutine of os/exec.
		testwait.For(t, 5*time.Second, "the corrupting server's warning", func() bool {
			return strings.Contains(srvs[2].stderr.String(), "FAULT INJECTION")
		})
		data, out, stats := filepath.Join(dir, "g2"), filepath.Join(dir, "out2"), filepath.Join(dir, "stats2.json")
		run(t, bin, "--data", data, "blocks", "get", id, "--from", from(), "-o", out, "--stats-json", stats)
		sameFile(t, src, out)
		st := readStats(t, stats)
		ps := st.Peers[srvs[2].addr]
		if ps == nil || !ps.Banned || ps.Corrupt == 0 || ps.Blocks != 0 {
			t.Errorf("corrupting source not banned: %+v", ps)
		}
		for _, s := range srvs[:2] {
			if st.Peers[s.addr].Blocks == 0 {
				t.Errorf("honest source %s served nothing", s.addr)
			}
		}
	})

	// killAfter starts a get, waits until progress(data) reaches 48 MiB,
	// SIGKILLs it and returns what progress(data) was then.
	killAfter := func(t *testing.T, data string, progress func(string) int, args ...string) int {
		t.Helper()
		get := startProc(t, "get (to be killed)", io.Discard, bin, append([]string{"--data", data, "blocks", "get", id, "--from", from()}, args...)...)
		deadline := time.Now().Add(2 * time.Minute)
		for progress(data) < 48 {
			if time.Now().After(deadline) {
				t.Fatalf("fetch made no progress; stderr:\n%s", get.stderr)
			}
			select {
			case <-get.done:
				t.Fatalf("get finished before it could be killed: %v\n%s", get.err, get.stderr)
			case <-time.After(10 * time.Millisecond):
			}
		}
		get.kill()
		return progress(data)
	}
	checkServed := func(t *testing.T, st *transfer.FetchStats) {
		t.Helper()
		served := 0
		for _, ps := range st.Peers {
			served += ps.Blocks
		}
		if served != st.Fetched {
			t.Errorf("sources served %d blocks, fetched %d", served, st.Fetched)
		}
	}

	// With -o on the store's file system the file is assembled in place,
	// in a partial file in the store, and no block file is written: a
	// killed fetch leaves the partial file, and the next one verifies
	// what it holds and fetches only the rest.
	t.Run("killed and resumed", func(t *testing.T) {
		data, out := filepath.Join(dir, "g3"), filepath.Join(dir, "out3")
		stats2 := filepath.Join(dir, "stats3b.json")
		held := killAfter(t, data, partialMiB, "-o", out)
		if held >= 256 {
			t.Fatalf("kill landed after the fetch (%d MiB in place)", held)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatal("output written by a killed fetch")
		}
		if n := countBlocks(data); n != 1 {
			t.Errorf("%d block files in the store, want only the manifest's", n)
		}
		run(t, bin, "--data", data, "blocks", "get", id, "--from", from(), "-o", out, "--stats-json", stats2)
		sameFile(t, src, out)
		st := readStats(t, stats2)
		t.Logf("killed with %d MiB in the partial file; second run: %d present, %d fetched", held, st.Present, st.Fetched)
		// Blocks being written at the kill may be torn: at most one per
		// request in flight (16).
		if st.Present < held-16 || st.Present == 0 || st.Fetched != st.Blocks-st.Present || st.Fetched == 0 {
			t.Errorf("second run did not resume: %d MiB in place at the kill, stats %+v", held, st)
		}
		checkServed(t, st)
		if v := run(t, bin, "--data", data, "blocks", "verify"); !strings.Contains(v, "257 blocks ok") {
			t.Errorf("verify: %q", v)
		}
		if parts, _ := filepath.Glob(filepath.Join(data, "store", "files", ".part-*")); len(parts) != 0 {
			t.Errorf("partial files left: %v", parts)
		}
	})

	// Without -o the blocks go to the store in batches: a killed fetch
	// leaves the batches it committed, and the next one fetches the rest.
	t.Run("killed and resumed, store only", func(t *testing.T) {
		data := filepath.Join(dir, "g4")
		stats2 := filepath.Join(dir, "stats4b.json")
		held := killAfter(t, data, countBlocks)
		if held >= 257 {
			t.Fatalf("kill landed after the fetch (%d blocks held)", held)
		}
		run(t, bin, "--data", data, "blocks", "get", id, "--from", from(), "--stats-json", stats2)
		st := readStats(t, stats2)
		t.Logf("killed with %d blocks on disk (manifest included); second run: %d present, %d fetched", held, st.Present, st.Fetched)
		// held counts the manifest block, st.Present does not.
		if st.Present != held-1 || st.Fetched != st.Blocks-st.Present || st.Fetched == 0 {
			t.Errorf("second run refetched held blocks: %d on disk, stats %+v", held, st)
		}
		checkServed(t, st)
		if v := run(t, bin, "--data", data, "blocks", "verify"); !strings.Contains(v, "257 blocks ok") {
			t.Errorf("verify: %q", v)
		}
	})
}

// partialMiB returns how many MiB of data a data directory's partial
// files hold: written ranges, found with SEEK_DATA and SEEK_HOLE (the
// files are sparse, or preallocated with unwritten extents, which count
// as holes).
func partialMiB(data string) int {
	const seekData, seekHole = 3, 4
	parts, _ := filepath.Glob(filepath.Join(data, "store", "files", ".part-*"))
	var n int64
	for _, p := range parts {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		for off := int64(0); ; {
			start, err := f.Seek(off, seekData)
			if err != nil {
				break
			}
			end, err := f.Seek(start, seekHole)
			if err != nil {
				break
			}
			n += end - start
			off = end
		}
		f.Close()
	}
	return int(n >> 20)
}
