package harness

import (
	"bytes"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// netnsHelperEnv switches TestNetnsChild on in a re-executed test binary.
const netnsHelperEnv = "P2PC_HARNESS_NETNS_HELPER"

func requireNetns(t *testing.T) {
	t.Helper()
	if err := NetnsAvailable(); err != nil {
		t.Skipf("no private network namespace here: %v", err)
	}
}

func TestNetnsCommand(t *testing.T) {
	requireNetns(t)
	self, err := netnsID()
	if err != nil {
		t.Fatal(err)
	}
	cmd := NetnsCommand("sh", "-c", `readlink /proc/self/ns/net; echo "env=$P2PC_NETNS parent=$P2PC_NETNS_PARENT"; ip -br link; ip route`)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	lines := strings.Split(out.String(), "\n")
	if lines[0] == self || !strings.HasPrefix(lines[0], "net:[") {
		t.Errorf("child namespace %q, parent %q: want a different one", lines[0], self)
	}
	for _, want := range []string{"env=1 parent=" + self, "224.0.0.0/4 dev lo", "lo "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, l := range lines[2:] {
		if f := strings.Fields(l); len(f) > 0 && f[0] != "lo" && !strings.Contains(l, "dev lo") {
			t.Errorf("namespace has more than loopback: %q", l)
		}
	}
}

func TestRequirePrivateNetnsSkipsOutside(t *testing.T) {
	if os.Getenv(NetnsEnv) == "1" {
		t.Skip("this process is inside a namespace")
	}
	var skipped bool
	t.Run("probe", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		RequirePrivateNetns(t)
	})
	if !skipped {
		t.Fatal("RequirePrivateNetns did not skip outside a private namespace")
	}
	if id, _ := netnsID(); id == initNetNS && InPrivateNetns() {
		t.Fatal("InPrivateNetns is true in the kernel's initial namespace")
	}
}

// TestNetnsMulticast re-executes this test binary in a private namespace
// and has TestNetnsChild check, there, that multicast to the mDNS group
// loops back.
func TestNetnsMulticast(t *testing.T) {
	requireNetns(t)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := NetnsCommand(bin, "-test.run=^TestNetnsChild$", "-test.v", "-test.count=1")
	cmd.Env = append(cmd.Env, netnsHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "multicast ok") {
		t.Fatalf("child did not confirm multicast:\n%s", out)
	}
}

func TestNetnsChild(t *testing.T) {
	if os.Getenv(netnsHelperEnv) != "1" {
		t.Skip("helper for TestNetnsMulticast")
	}
	if !InPrivateNetns() {
		t.Fatal("InPrivateNetns is false inside the namespace")
	}
	RequirePrivateNetns(t)
	group := &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353}
	l, err := net.ListenMulticastUDP("udp4", nil, group)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.WriteToUDP([]byte("hello"), group); err != nil {
		t.Fatal(err)
	}
	_ = l.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, from, err := l.ReadFromUDP(buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:n]) != "hello" {
		t.Fatalf("got %q", buf[:n])
	}
	t.Logf("multicast ok (from %s)", from)
}
