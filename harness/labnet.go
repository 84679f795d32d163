package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LabPrefix starts the name of every network namespace and cgroup a lab
// makes: "p2pcb-<pid of the owner>-<lab number>-<node>" (see LabName). A
// later run tells a crashed run's leftovers (owner gone: removed) from
// those of a lab still running (left alone) by the owner's lock in
// LabLockDir, not by its PID.
const LabPrefix = "p2pcb-"

// Lab address plan (Bridge mode). The addresses exist only inside the
// lab's namespaces: nothing is configured in the machine's root namespace.
const (
	labSubnet    = "10.213.0.0/16"
	submitterIP  = "10.213.0.2"
	labPrefixLen = 16
)

// peerIP is the address of the i-th peer (from 0): 10.213.1.1 and up.
func peerIP(i int) string { return fmt.Sprintf("10.213.%d.%d", 1+i/250, 1+i%250) }

var (
	labOnce sync.Once
	labErr  error
)

// LabAvailable reports whether this process can build labs: Linux, root,
// iproute2 installed, and `ip netns add` works. It tries once.
func LabAvailable() error {
	labOnce.Do(func() { labErr = probeLab() })
	return labErr
}

func probeLab() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("a lab needs Linux network namespaces, this is %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return errors.New("a lab needs root: it creates network namespaces, veth pairs, bridges and cgroups")
	}
	ip, err := ipPath()
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s%d-probe", LabPrefix, os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := runCmd(ctx, ip, "netns", "add", name); err != nil {
		return fmt.Errorf("ip netns add: %w", err)
	}
	if err := runCmd(ctx, ip, "netns", "del", name); err != nil {
		return fmt.Errorf("ip netns del: %w", err)
	}
	return nil
}

// runCmd runs a command and returns its output in the error.
func runCmd(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// netOps builds and removes a lab's network: it remembers every
// namespace it made so that remove undoes exactly that.
type netOps struct {
	ip      string
	tc      string
	nsenter string
	mu      sync.Mutex
	nss     []string // created, in order
}

func newNetOps() (*netOps, error) {
	ip, err := ipPath()
	if err != nil {
		return nil, err
	}
	tc, _ := exec.LookPath("tc")
	if tc == "" {
		for _, p := range []string{"/usr/sbin/tc", "/sbin/tc"} {
			if _, err := os.Stat(p); err == nil {
				tc = p
				break
			}
		}
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, fmt.Errorf("a lab needs nsenter (Debian package util-linux): %w", err)
	}
	return &netOps{ip: ip, tc: tc, nsenter: nsenter}, nil
}

func (o *netOps) run(ctx context.Context, args ...string) error {
	return runCmd(ctx, o.ip, args...)
}

// addNetns creates a namespace with loopback up.
func (o *netOps) addNetns(ctx context.Context, name string) error {
	if err := o.run(ctx, "netns", "add", name); err != nil {
		return err
	}
	o.mu.Lock()
	o.nss = append(o.nss, name)
	o.mu.Unlock()
	return o.run(ctx, "-n", name, "link", "set", "lo", "up")
}

// loopbackMulticast pins the IPv4 multicast route to loopback, so mDNS
// works between the processes of one namespace.
func (o *netOps) loopbackMulticast(ctx context.Context, ns string) error {
	return o.run(ctx, "-n", ns, "route", "add", "224.0.0.0/4", "dev", "lo")
}

// addBridge makes the hub's bridge. Multicast snooping is off so that
// mDNS reaches every port as on a plain switch.
func (o *netOps) addBridge(ctx context.Context, hub string) error {
	if err := o.run(ctx, "-n", hub, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"); err != nil {
		return err
	}
	return o.run(ctx, "-n", hub, "link", "set", "br0", "up")
}

// attach joins namespace ns to the hub's bridge with a veth pair (hub end
// hostIf, ns end eth0 with ip/16) and routes multicast through eth0.
func (o *netOps) attach(ctx context.Context, hub, hostIf, ns, ip string) error {
	steps := [][]string{
		{"-n", hub, "link", "add", hostIf, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"-n", hub, "link", "set", hostIf, "master", "br0", "up"},
		{"-n", ns, "addr", "add", fmt.Sprintf("%s/%d", ip, labPrefixLen), "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "route", "add", "224.0.0.0/4", "dev", "eth0"},
	}
	for _, s := range steps {
		if err := o.run(ctx, s...); err != nil {
			return err
		}
	}
	return nil
}

// rateLimit caps what ns sends through eth0 with a token bucket.
func (o *netOps) rateLimit(ctx context.Context, ns, rate string) error {
	if o.tc == "" {
		return errors.New("tc not found (Debian package iproute2)")
	}
	return runCmd(ctx, o.ip, "netns", "exec", ns, o.tc, "qdisc", "add", "dev", "eth0", "root", "tbf",
		"rate", rate, "burst", "256kb", "latency", "200ms")
}

// remove kills what still runs in the namespaces and deletes them, last
// made first (peer namespaces before the hub: deleting a namespace
// deletes its veth ends, and with them the pairs).
func (o *netOps) remove() error {
	o.mu.Lock()
	nss := o.nss
	o.nss = nil
	o.mu.Unlock()
	var errs []error
	for i := len(nss) - 1; i >= 0; i-- {
		if err := deleteNetns(o.ip, nss[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteNetns kills every process left in namespace ns and deletes it.
func deleteNetns(ip, ns string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		out, err := exec.CommandContext(ctx, ip, "netns", "pids", ns).Output()
		if err != nil {
			break
		}
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil && pid > 1 {
				_ = killPID(pid)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := runCmd(ctx, ip, "netns", "del", ns); err != nil {
		return fmt.Errorf("remove network namespace %s: %w", ns, err)
	}
	return nil
}

// netnsCommandArgs prefixes args so that they run inside namespace ns.
//
// nsenter, not `ip netns exec`: that one also gives the command a mount
// namespace with /sys mounted again for the network namespace, which
// hides the cgroup hierarchies mounted under /sys/fs/cgroup, so that
// peers fell back to rlimits instead of cgroups for their plugins (and
// a fork bomb test elsewhere on the machine, raising the task user's
// process count, left them unable to start threads).
func (o *netOps) netnsCommandArgs(ns string, args ...string) []string {
	return append([]string{o.nsenter, "--net=" + filepath.Join("/run/netns", ns), "--"}, args...)
}

// labNameRe matches the names of lab objects: LabPrefix, the owner's PID,
// the lab's number, and optionally more.
var labNameRe = regexp.MustCompile(`^` + regexp.QuoteMeta(LabPrefix) + `([0-9]+)-[0-9]+(-.*)?$`)

// CleanStaleLabs removes the network namespaces and cgroups that labs of
// processes no longer running left behind (a crash, a SIGKILL): those
// whose owner's lock it can take (labowner.go). Labs of live processes are
// left alone. It returns what it removed.
func CleanStaleLabs() ([]string, error) {
	if err := LabAvailable(); err != nil {
		return nil, err
	}
	ip, err := ipPath()
	if err != nil {
		return nil, err
	}
	dir, err := labLockDir()
	if err != nil {
		return nil, err
	}
	owners := newStaleOwners(dir)
	defer owners.release()
	var removed []string
	var errs []error
	entries, _ := os.ReadDir("/run/netns")
	if len(entries) == 0 {
		entries, _ = os.ReadDir("/var/run/netns")
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, LabPrefix) || !owners.gone(name) {
			continue
		}
		if err := deleteNetns(ip, name); err != nil {
			owners.failedFor(name)
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "netns "+name)
	}
	// Lab TMPDIRs (and lab folders made by NewLab) of dead owners.
	tmp, _ := os.ReadDir(os.TempDir())
	for _, e := range tmp {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), LabPrefix) || !owners.gone(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(os.TempDir(), e.Name())); err != nil {
			owners.failedFor(e.Name())
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "folder "+filepath.Join(os.TempDir(), e.Name()))
	}
	cg, err := cgroupRemoveStale(owners)
	removed = append(removed, cg...)
	if err != nil {
		errs = append(errs, err)
	}
	owners.release()
	sweepLockFiles(dir, owners.failed)
	return removed, errors.Join(errs...)
}

// waitEmpty waits up to d for the namespaces to hold no process and
// returns what still runs in them then, as "namespace: pid command".
func (o *netOps) waitEmpty(d time.Duration) []string {
	o.mu.Lock()
	nss := slices.Clone(o.nss)
	o.mu.Unlock()
	deadline := time.Now().Add(d)
	for {
		var left []string
		for _, ns := range nss {
			out, err := exec.Command(o.ip, "netns", "pids", ns).Output()
			if err != nil {
				continue
			}
			for _, pid := range strings.Fields(string(out)) {
				cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
				left = append(left, fmt.Sprintf("%s: %s %s", ns, pid, strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setLink sets the hub end of a veth pair down or up.
func (o *netOps) setLink(ctx context.Context, hub, link string, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return o.run(ctx, "-n", hub, "link", "set", link, state)
}

// neighPath is where the kernel's IPv4 neighbour (ARP) table limits live.
// The table is shared by every network namespace (the limits can be set
// only from the machine's own namespace), so a lab of n peers that all
// talk to each other -- gossip is a full mesh -- holds about n² entries:
// 48 peers already pass the default hard limit of 1024, and new entries
// then fail ("neighbor table overflow", EHOSTUNREACH).
const neighPath = "/proc/sys/net/ipv4/neigh/default/"

// raiseNeighbourLimits raises the shared ARP table's limits (gc_thresh2,
// the soft one, and gc_thresh3, the hard one) so that a lab of peers
// namespaces fits beside what else runs: never lowers them. It returns
// what it changed ("" if nothing).
func raiseNeighbourLimits(peers int) (string, error) {
	need := (peers + 2) * (peers + 1) // every namespace of the lab knows every other
	var changed []string
	for _, t := range []struct {
		name string
		want int
	}{{"gc_thresh2", 2 * need}, {"gc_thresh3", 4 * need}} {
		b, err := os.ReadFile(neighPath + t.name)
		if err != nil {
			return "", fmt.Errorf("raise the ARP table's limits: %w", err)
		}
		cur, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return "", fmt.Errorf("raise the ARP table's limits: %s: %w", t.name, err)
		}
		if cur >= t.want {
			continue
		}
		if err := os.WriteFile(neighPath+t.name, []byte(strconv.Itoa(t.want)), 0o644); err != nil {
			return "", fmt.Errorf("raise the ARP table's limits: %w", err)
		}
		changed = append(changed, fmt.Sprintf("%s %d -> %d", t.name, cur, t.want))
	}
	return strings.Join(changed, ", "), nil
}
