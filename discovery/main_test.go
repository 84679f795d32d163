package discovery_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/discovery"
	"github.com/p2pc/p2pc/harness"
)

// The test binary doubles as a member process (for tests that stop and
// kill a real member, and for mDNS discovery between processes),
// switched on by memberEnv.
const (
	memberEnv     = "P2PC_DISCOVERY_MEMBER"      // node name
	memberJoinEnv = "P2PC_DISCOVERY_MEMBER_JOIN" // comma-separated gossip addresses
	memberMDNSEnv = "P2PC_DISCOVERY_MEMBER_MDNS" // "1": find the others with mDNS
	memberLANEnv  = "P2PC_DISCOVERY_MEMBER_LAN"  // "1": LANTiming, else LoopbackTiming
)

// TestMain runs the tests in a private network namespace (mDNS must never
// multicast in the machine's root namespace), or runs as a member process.
func TestMain(m *testing.M) {
	if name := os.Getenv(memberEnv); name != "" {
		os.Exit(memberMain(name))
	}
	os.Exit(harness.MainInNetns(m))
}

// memberMain runs one member until SIGTERM (or 2 minutes): it prints
// "gossip=ADDR" once started and "members=a,b,c" whenever the member list
// changes.
func memberMain(name string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	timing := discovery.LoopbackTiming()
	if os.Getenv(memberLANEnv) == "1" {
		timing = discovery.LANTiming()
	}
	ms, err := discovery.Start(ctx, discovery.Config{
		Name: name, BindAddr: "127.0.0.1", SecretKey: testKey, Logger: log, Timing: timing,
		Meta: func() discovery.Meta {
			return discovery.Meta{GRPCAddr: "127.0.0.1:7000", Version: "test", Proto: 1, Slots: 2, FreeSlots: 2}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ms.Close()
	fmt.Printf("gossip=%s\n", ms.GossipAddr())
	if j := os.Getenv(memberJoinEnv); j != "" {
		if _, err := ms.Join(ctx, strings.Split(j, ",")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if os.Getenv(memberMDNSEnv) == "1" {
		md, err := discovery.NewMDNS(discovery.MDNSConfig{
			Self: &discovery.Announcement{
				Name: name, GRPCAddr: "127.0.0.1:7000", GossipAddr: ms.GossipAddr(), Version: 1,
			},
			QueryTimeout: 300 * time.Millisecond,
			TTL:          5 * time.Second,
			Logger:       log,
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer md.Close()
		go func() {
			if err := ms.JoinFrom(ctx, md, 500*time.Millisecond); err != nil {
				fmt.Fprintln(os.Stderr, err)
				cancel()
			}
		}()
	}
	last := ""
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		var names []string
		for _, mem := range ms.Members() {
			names = append(names, mem.Name)
		}
		if s := strings.Join(names, ","); s != last {
			fmt.Printf("members=%s\n", s)
			last = s
		}
		select {
		case <-ctx.Done():
			return 0
		case <-t.C:
		}
	}
}

// startMemberProc re-executes the test binary as a member process.
func startMemberProc(t *testing.T, name string, env ...string) (*harness.Proc, string) {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := harness.Start(bin, []string{"-test.run=^$"}, harness.Options{
		Name: name, Env: append([]string{memberEnv + "=" + name}, env...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if err := p.CheckLogs(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := p.WaitOutput(ctx, gossipLine)
	if err != nil {
		t.Fatal(err)
	}
	return p, m[1]
}

func itoa(i int) string { return strconv.Itoa(i) }

// testKey is the gossip key of the tests' swarm (the subprocess members
// of TestMain use it too).
var testKey = []byte("p2pc-discovery-tests-gossip-key!")
