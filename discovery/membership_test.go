package discovery_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/internal/testwait"
)

var gossipLine = regexp.MustCompile(`gossip=(\S+)`)

// testLogger logs to the test log: at debug level with
// P2PC_TEST_DEBUG=1, warnings and up otherwise. Lines written after the
// test's cleanups ran are dropped (t.Log would panic).
func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("P2PC_TEST_DEBUG") == "1" {
		level = slog.LevelDebug
	}
	w := &tWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type tWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// node is an in-process member with adjustable metadata.
type node struct {
	*discovery.Membership
	name  string
	free  atomic.Int64
	proto atomic.Int64
}

func startNode(t *testing.T, name string, timing discovery.Timing) *node {
	t.Helper()
	n := &node{name: name}
	n.free.Store(4)
	n.proto.Store(1)
	ms, err := discovery.Start(context.Background(), discovery.Config{
		Name: name, BindAddr: "127.0.0.1", SecretKey: testKey, Logger: testLogger(t), Timing: timing,
		Meta: func() discovery.Meta {
			return discovery.Meta{
				GRPCAddr: "127.0.0.1:7" + name[len(name)-1:] + "00", Version: "v-test",
				Proto: int(n.proto.Load()), Slots: 4, FreeSlots: int(n.free.Load()),
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Membership = ms
	t.Cleanup(func() { _ = ms.Close() })
	return n
}

// startCluster starts n members named n0..n{n-1}, all joined through n0,
// and waits until every one sees all.
func startCluster(t *testing.T, n int, timing discovery.Timing) []*node {
	t.Helper()
	nodes := make([]*node, n)
	for i := range nodes {
		nodes[i] = startNode(t, "n"+itoa(i), timing)
		if i > 0 {
			if k, err := nodes[i].Join(context.Background(), []string{nodes[0].GossipAddr()}); err != nil || k != 1 {
				t.Fatalf("join n%d: %d, %v", i, k, err)
			}
		}
	}
	testwait.For(t, 10*time.Second, "all members see each other", func() bool {
		for _, nd := range nodes {
			if len(nd.Members()) != n {
				return false
			}
		}
		return true
	})
	return nodes
}

// waitEvent waits for an event of kind about member name, skipping others.
func waitEvent(t *testing.T, ch <-chan discovery.Event, kind discovery.EventKind, name string, timeout time.Duration) (discovery.Event, time.Duration) {
	t.Helper()
	start := time.Now()
	deadline := time.After(timeout)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("events closed while waiting for %s of %s", kind, name)
			}
			if e.Kind == kind && e.Member.Name == name {
				return e, time.Since(start)
			}
			if (e.Kind == discovery.Dead || e.Kind == discovery.Leave) && e.Member.Name != name {
				t.Logf("note: %s event for %s (a false suspicion on a loaded machine?)", e.Kind, e.Member.Name)
			}
		case <-deadline:
			t.Fatalf("no %s event for %s within %s", kind, name, timeout)
		}
	}
}

func TestFiveMembers(t *testing.T) {
	nodes := startCluster(t, 5, discovery.LoopbackTiming())
	addrs := map[string]string{}
	for _, nd := range nodes {
		addrs[nd.name] = nd.GossipAddr()
		if !strings.HasPrefix(nd.GossipAddr(), "127.0.0.1:") || strings.HasSuffix(nd.GossipAddr(), ":0") {
			t.Errorf("%s: gossip address %q", nd.name, nd.GossipAddr())
		}
	}
	for _, nd := range nodes {
		ms := nd.Members()
		if !slices.IsSortedFunc(ms, func(a, b discovery.Member) int { return strings.Compare(a.Name, b.Name) }) {
			t.Errorf("%s: members not sorted", nd.name)
		}
		for i, mem := range ms {
			want := discovery.Member{
				Meta: discovery.Meta{
					Name: "n" + itoa(i), GRPCAddr: "127.0.0.1:7" + itoa(i) + "00", OS: runtime.GOOS, Arch: runtime.GOARCH,
					Version: "v-test", Proto: 1, Slots: 4, FreeSlots: 4,
				},
				GossipAddr: addrs["n"+itoa(i)], State: discovery.StateAlive, Compatible: true,
			}
			if mem.LastSeen.IsZero() {
				t.Errorf("%s sees %s with no LastSeen", nd.name, mem.Name)
			}
			mem.LastSeen = time.Time{}
			if mem != want {
				t.Errorf("%s sees\n %+v\nwant\n %+v", nd.name, mem, want)
			}
		}
	}
}

func TestUpdateMetaPropagates(t *testing.T) {
	nodes := startCluster(t, 3, discovery.LoopbackTiming())
	nodes[1].free.Store(1)
	start := time.Now()
	if err := nodes[1].UpdateMeta(context.Background()); err != nil {
		t.Fatal(err)
	}
	e, _ := waitEvent(t, nodes[0].Events(), discovery.Update, "n1", 5*time.Second)
	if e.Member.FreeSlots != 1 || e.Member.State != discovery.StateAlive {
		t.Errorf("update event %+v", e.Member)
	}
	for _, nd := range []*node{nodes[0], nodes[2]} {
		testwait.For(t, 5*time.Second, nd.name+" sees n1 with 1 free slot", func() bool {
			for _, mem := range nd.Members() {
				if mem.Name == "n1" {
					return mem.FreeSlots == 1
				}
			}
			return false
		})
	}
	took := time.Since(start)
	t.Logf("metadata update seen by all in %s", took)
	if took > 2*time.Second {
		t.Errorf("update took %s, want about 1 s at most", took)
	}
}

func TestLeaveEvent(t *testing.T) {
	nodes := startCluster(t, 3, discovery.LoopbackTiming())
	if err := nodes[2].Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	e, took := waitEvent(t, nodes[0].Events(), discovery.Leave, "n2", 5*time.Second)
	t.Logf("leave seen in %s", took)
	if e.Member.State != discovery.StateLeft || e.Member.GossipAddr != nodes[2].GossipAddr() {
		t.Errorf("leave event %+v", e.Member)
	}
	testwait.For(t, 5*time.Second, "n2 gone from n1's members", func() bool { return len(nodes[1].Members()) == 2 })
	if err := nodes[2].Close(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[2].Leave(time.Second); !errors.Is(err, discovery.ErrClosed) {
		t.Errorf("Leave after Close: %v", err)
	}
}

// TestLeaveThenExit leaves as `p2pc run` does once its results are safe:
// Leave with a short bound, then Close at once (the process exits). Every
// other member must report a Leave (the leave note reached it), never a
// death, though the leave message had little time to spread.
func TestLeaveThenExit(t *testing.T) {
	nodes := startCluster(t, 5, discovery.LoopbackTiming())
	leaver := nodes[4]
	start := time.Now()
	err := leaver.Leave(20 * time.Millisecond) // may time out: the notes are out first
	t.Logf("Leave returned after %s (err %v)", time.Since(start), err)
	if cerr := leaver.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	for _, nd := range nodes[:4] {
		e := firstGone(t, nd.Events(), "n4", 10*time.Second)
		if e.Kind != discovery.Leave || e.Member.State != discovery.StateLeft {
			t.Errorf("%s: %s event (state %s) for a member that left", nd.name, e.Kind, e.Member.State)
		}
		if n := len(nd.Members()); n != 4 {
			t.Errorf("%s lists %d members after the leave, want 4", nd.name, n)
		}
	}
}

// TestAllLeaveAtOnce: every member leaves at the same moment (a machine
// shutting down its peers, a swarm's benchmark ending). Each still tells
// the others, who report Leaves and no death, and no Leave waits for
// gossip that has no one left to go to (it returns without a timeout).
func TestAllLeaveAtOnce(t *testing.T) {
	nodes := startCluster(t, 4, discovery.LoopbackTiming())
	errs := make(chan error, len(nodes))
	for _, nd := range nodes {
		go func() {
			err := nd.Leave(5 * time.Second)
			_ = nd.Close()
			errs <- err
		}()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Errorf("Leave: %v", err)
		}
	}
	for _, nd := range nodes {
		for e := range nd.Events() { // closed by Close
			if e.Kind == discovery.Dead {
				t.Errorf("%s reports %s dead; all of them left", nd.name, e.Member.Name)
			}
		}
	}
}

// firstGone waits for the first Leave or Dead event about name.
func firstGone(t *testing.T, ch <-chan discovery.Event, name string, timeout time.Duration) discovery.Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("events closed while waiting for %s to go", name)
			}
			if (e.Kind == discovery.Leave || e.Kind == discovery.Dead) && e.Member.Name == name {
				return e
			}
		case <-deadline:
			t.Fatalf("%s still listed %s after it left", timeout, name)
		}
	}
}

// TestDeadOnSilentClose measures failure detection with LANTiming: a
// member that stops without leaving is reported Dead.
func TestDeadOnSilentClose(t *testing.T) {
	nodes := startCluster(t, 3, discovery.LANTiming())
	time.Sleep(time.Second) // let probing settle into its rhythm
	_ = nodes[2].Close()
	e, took := waitEvent(t, nodes[0].Events(), discovery.Dead, "n2", 10*time.Second)
	t.Logf("LANTiming: silent close of 1 of 3 members detected (Dead event) after %s", took)
	if e.Member.State != discovery.StateDead {
		t.Errorf("dead event %+v", e.Member)
	}
	testwait.For(t, 5*time.Second, "n2 gone from n1's members", func() bool { return len(nodes[1].Members()) == 2 })
}

// TestDeadProcess stops (SIGSTOP) one real member process and kills
// (SIGKILL) another, and measures how long the in-process member takes to
// report each Dead, with LANTiming.
func TestDeadProcess(t *testing.T) {
	obs := startNode(t, "n0", discovery.LANTiming())
	p1, _ := startMemberProc(t, "p1", memberJoinEnv+"="+obs.GossipAddr(), memberLANEnv+"=1")
	p2, _ := startMemberProc(t, "p2", memberJoinEnv+"="+obs.GossipAddr(), memberLANEnv+"=1")
	testwait.For(t, 10*time.Second, "n0 sees p1 and p2", func() bool { return len(obs.Members()) == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []interface {
		WaitOutput(context.Context, *regexp.Regexp) ([]string, error)
	}{p1, p2} {
		if _, err := p.WaitOutput(ctx, regexp.MustCompile(`members=n0,p1,p2`)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)

	if err := p1.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	suspected := make(chan time.Duration, 1)
	stopWatch := make(chan struct{})
	go func() { // best effort: the observer may learn of the death from p2 first
		start := time.Now()
		for {
			for _, mem := range obs.Members() {
				if mem.Name == "p1" && mem.State == discovery.StateSuspect {
					suspected <- time.Since(start)
					return
				}
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	_, took := waitEvent(t, obs.Events(), discovery.Dead, "p1", 10*time.Second)
	close(stopWatch)
	t.Logf("LANTiming: SIGSTOPped member process declared dead after %s", took)
	select {
	case s := <-suspected:
		t.Logf("the observer listed it as suspect after %s", s)
	default:
		t.Logf("the observer never listed it as suspect (p2's probe found it first)")
	}

	if err := p2.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, took = waitEvent(t, obs.Events(), discovery.Dead, "p2", 10*time.Second)
	t.Logf("LANTiming: SIGKILLed member process declared dead after %s", took)
	p1.Kill()
	if got := obs.Members(); len(got) != 1 {
		t.Errorf("members after both died: %v", got)
	}
}

func TestNameTaken(t *testing.T) {
	a := startNode(t, "n1", discovery.LoopbackTiming())
	b := startNode(t, "n1", discovery.LoopbackTiming())
	_, err := b.Join(context.Background(), []string{a.GossipAddr()})
	if !errors.Is(err, discovery.ErrNameTaken) {
		t.Fatalf("join with a taken name: err = %v", err)
	}
	t.Logf("error: %v", err)
	if !strings.Contains(err.Error(), a.GossipAddr()) {
		t.Errorf("error does not name the other member's address %s", a.GossipAddr())
	}
}

func TestProtoMismatchFlagged(t *testing.T) {
	a := startNode(t, "n1", discovery.LoopbackTiming())
	b := startNode(t, "n2", discovery.LoopbackTiming())
	b.proto.Store(2)
	if err := b.UpdateMeta(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join(context.Background(), []string{a.GossipAddr()}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "both listed", func() bool { return len(a.Members()) == 2 })
	for _, mem := range a.Members() {
		if want := mem.Name == "n1"; mem.Compatible != want {
			t.Errorf("n1 sees %s (proto %d) with Compatible %v", mem.Name, mem.Proto, mem.Compatible)
		}
	}
}

func TestMetaTooLarge(t *testing.T) {
	_, err := discovery.Start(context.Background(), discovery.Config{
		Name: "big", BindAddr: "127.0.0.1", SecretKey: testKey,
		Meta: func() discovery.Meta { return discovery.Meta{Version: strings.Repeat("x", 600)} },
	})
	if err == nil || !strings.Contains(err.Error(), "limit of 512") {
		t.Fatalf("Start with 600-byte metadata: err = %v", err)
	}
	var big atomic.Bool
	ms, err := discovery.Start(context.Background(), discovery.Config{
		Name: "grows", BindAddr: "127.0.0.1", SecretKey: testKey,
		Meta: func() discovery.Meta {
			if big.Load() {
				return discovery.Meta{Version: strings.Repeat("x", 600)}
			}
			return discovery.Meta{Version: "small"}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	big.Store(true)
	if err := ms.UpdateMeta(context.Background()); err == nil {
		t.Fatal("UpdateMeta accepted 600-byte metadata")
	}
	if v := ms.Members()[0].Version; v != "small" {
		t.Errorf("metadata after the refused update: %q", v)
	}
}

func TestJoinFromStatic(t *testing.T) {
	a := startNode(t, "n1", discovery.LoopbackTiming())
	b := startNode(t, "n2", discovery.LoopbackTiming())
	c := startNode(t, "n3", discovery.LoopbackTiming())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	for _, nd := range []*node{b, c} {
		go func() {
			done <- nd.JoinFrom(ctx, discovery.Static{{Name: "n1", GossipAddr: a.GossipAddr()}}, 100*time.Millisecond)
		}()
	}
	testwait.For(t, 10*time.Second, "three members everywhere", func() bool {
		return len(a.Members()) == 3 && len(b.Members()) == 3 && len(c.Members()) == 3
	})
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("JoinFrom: %v", err)
		}
	}
}

func TestCloseEndsEverything(t *testing.T) {
	waitNoGoroutines(t, "before") // earlier tests' members wind down
	nodes := startCluster(t, 3, discovery.LoopbackTiming())
	ctx := context.Background()
	done := make(chan error, 1)
	asked := &askedFinder{Finder: discovery.Static{{GossipAddr: nodes[0].GossipAddr()}}, asked: make(chan struct{})}
	go func() {
		done <- nodes[1].JoinFrom(ctx, asked, 50*time.Millisecond)
	}()
	select { // Close comes while JoinFrom runs
	case <-asked.asked:
	case <-time.After(5 * time.Second): // a bound on a failing test
		t.Fatal("JoinFrom did not ask its finder within 5s")
	}
	for _, nd := range nodes {
		if err := nd.Close(); err != nil {
			t.Fatal(err)
		}
		if err := nd.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		for range nd.Events() { // drained and closed
		}
	}
	if err := <-done; err != nil {
		t.Errorf("JoinFrom after Close: %v", err)
	}
	if _, err := nodes[0].Join(ctx, []string{"127.0.0.1:1"}); !errors.Is(err, discovery.ErrClosed) {
		t.Errorf("Join after Close: %v", err)
	}
	waitNoGoroutines(t, "after Close")
}

// waitNoGoroutines waits until no goroutine runs code of discovery,
// memberlist or mdns.
func waitNoGoroutines(t *testing.T, when string) {
	t.Helper()
	var stacks string
	deadline := time.Now().Add(5 * time.Second)
	for {
		stacks = ourGoroutines()
		if stacks == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left %s:\n%s", when, stacks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ourGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var left []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "hashicorp/memberlist") || strings.Contains(g, "hashicorp/mdns") ||
			strings.Contains(g, "p2pc/p2pc/discovery.") {
			left = append(left, g)
		}
	}
	return strings.Join(left, "\n\n")
}

// TestOtherSwarmCannotJoin: gossip is sealed with the swarm's key; a node
// with another key (or none) neither joins nor is seen.
func TestOtherSwarmCannotJoin(t *testing.T) {
	n1 := startNode(t, "n1", discovery.LoopbackTiming())
	stranger, err := discovery.Start(context.Background(), discovery.Config{
		Name: "stranger", BindAddr: "127.0.0.1", SecretKey: []byte("another-swarm's-gossip-key-32by!"), Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := stranger.Join(ctx, []string{n1.GossipAddr()}); err == nil {
		t.Fatal("a member of another swarm joined")
	}
	if _, err := n1.Join(ctx, []string{stranger.GossipAddr()}); err == nil {
		t.Fatal("joined a member of another swarm")
	}
	if ms := n1.Members(); len(ms) != 1 {
		t.Fatalf("n1 sees %d members, want itself only", len(ms))
	}
	if ms := stranger.Members(); len(ms) != 1 {
		t.Fatalf("the stranger sees %d members", len(ms))
	}
	if _, err := discovery.Start(context.Background(), discovery.Config{Name: "nokey", BindAddr: "127.0.0.1"}); err == nil || !strings.Contains(err.Error(), "gossip key") {
		t.Fatalf("a membership without a key started: %v", err)
	}
}

// A member that went silent long enough to be forgotten, and then came
// back at its address knowing no one (as after a partition that outlasted
// GossipToTheDeadTime), is joined again by the member that remembers it.
func TestRejoinForgottenMember(t *testing.T) {
	timing := discovery.LoopbackTiming()
	timing.GossipToTheDeadTime = time.Millisecond // forgotten at once
	a := startNode(t, "n1", timing)
	b := startNode(t, "n2", timing)
	if _, err := b.Join(context.Background(), []string{a.GossipAddr()}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "two members", func() bool { return len(a.Members()) == 2 })
	_, port, err := net.SplitHostPort(b.GossipAddr())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil { // silent: no leave
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "n1 to declare n2 failed", func() bool { return len(a.Members()) == 1 })
	// n2 again, at the same address, joining no one.
	p, _ := strconv.Atoi(port)
	back, err := discovery.Start(context.Background(), discovery.Config{
		Name: "n2", BindAddr: "127.0.0.1", BindPort: p, SecretKey: testKey, Logger: testLogger(t), Timing: timing,
		Meta: func() discovery.Meta { return discovery.Meta{GRPCAddr: "127.0.0.1:7200", Proto: 1} },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { back.Close() })
	start := time.Now()
	testwait.For(t, 15*time.Second, "n1 to re-join n2", func() bool { return len(a.Members()) == 2 && len(back.Members()) == 2 })
	t.Logf("re-joined %s after n2 came back", time.Since(start).Round(time.Millisecond))
}

// askedFinder closes asked the first time it is asked for peers.
type askedFinder struct {
	discovery.Finder
	asked chan struct{}
	once  sync.Once
}

func (f *askedFinder) Find(ctx context.Context) ([]discovery.Peer, error) {
	f.once.Do(func() { close(f.asked) })
	return f.Finder.Find(ctx)
}
