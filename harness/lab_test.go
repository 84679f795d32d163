package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/sandbox"
)

// labBin builds p2pc once for the lab tests.
func labBin(t *testing.T) string {
	t.Helper()
	if err := LabAvailable(); err != nil {
		t.Skipf("no lab here: %v", err)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "p2pc")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Build(ctx, root, bin, false); err != nil {
		t.Fatal(err)
	}
	return bin
}

func echoSpec(t *testing.T, dir string, tasks int) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "echo.yaml")
	body := fmt.Sprintf("name: lab-echo\nplugin: %s\nparams: {sleep_ms: 20}\ntasks:\n  - range: {param: i, from: 0, to: %d}\ntimeout: 30s\n",
		filepath.Join(root, "plugins", "echo"), tasks-1)
	if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec
}

// labLeftovers lists the namespaces and cgroups named after lab.
func labLeftovers(name string) []string {
	var out []string
	for _, d := range []string{"/run/netns", "/var/run/netns"} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), name) {
				out = append(out, filepath.Join(d, e.Name()))
			}
		}
	}
	if _, err := os.Stat(filepath.Join(os.TempDir(), name)); err == nil {
		out = append(out, filepath.Join(os.TempDir(), name))
	}
	if ctl, err := findCPUControllerNoMount(); err == nil {
		if _, err := os.Stat(filepath.Join(ctl.Root, name)); err == nil {
			out = append(out, filepath.Join(ctl.Root, name))
		}
	}
	return out
}

// TestLab runs a 2-peer echo job in each mode: in Bridge mode the
// submitter finds the peers with mDNS across the bridge, in Loopback mode
// it is given their addresses. One peer has a CPU quota. Afterwards
// nothing of the lab may be left.
func TestLab(t *testing.T) {
	bin := labBin(t)
	for _, tc := range []struct {
		mode Mode
		mdns bool
	}{{Bridge, true}, {Loopback, false}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			lab, err := NewLab(ctx, LabConfig{
				Bin:   bin,
				Mode:  tc.mode,
				MDNS:  tc.mdns,
				Peers: []PeerSpec{{Name: "a", Slots: 2}, {Name: "b", Slots: 2, CPU: 0.5}},
			})
			if err != nil {
				t.Fatal(err)
			}
			name := lab.Name()
			defer func() {
				if err := lab.Close(); err != nil {
					t.Error(err)
				}
				if left := labLeftovers(name); len(left) > 0 {
					t.Errorf("left behind after Close: %v", left)
				}
			}()
			if len(labLeftovers(name)) == 0 {
				t.Fatal("no namespace or cgroup of the lab found while it runs")
			}
			for _, p := range lab.Peers() {
				if tc.mode == Bridge && !strings.HasPrefix(p.Addr, "10.213.") {
					t.Errorf("peer %s listens on %s, want the lab subnet", p.Name, p.Addr)
				}
				// A peer in its namespace sees the cgroups this process
				// sees: its plugins get what they get on a real machine.
				if cg := sandbox.Cgroups(); cg.Version != 0 {
					m, err := p.Proc.WaitStderr(ctx, regexp.MustCompile(`tasks confined: .*? cgroup=(\S+)`))
					if err != nil {
						t.Fatal(err)
					}
					if want := fmt.Sprintf("v%d(", cg.Version); !strings.HasPrefix(m[1], want) {
						t.Errorf("peer %s: cgroup=%s, want %s...) as this process gets\n%s", p.Name, m[1], want, p.Proc.Stderr())
					}
				}
			}
			spec := echoSpec(t, dir, 16)
			// Both peers must have enrolled before a task is handed out:
			// mDNS may find one later than the other.
			sub, err := lab.Submit(ctx, SubmitOptions{Spec: spec, Out: filepath.Join(dir, "out"), Args: []string{"--min-peers", "2"}, SampleCPU: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if sub.Report.Summary.Done != 16 {
				t.Fatalf("done %d of 16", sub.Report.Summary.Done)
			}
			ran := map[string]int{}
			for _, task := range sub.Report.Tasks {
				ran[task.Peer]++
			}
			if ran["a"] == 0 || ran["b"] == 0 {
				t.Errorf("both peers should take part: %v", ran)
			}
			if len(sub.CPU) == 0 {
				t.Error("no CPU samples of the run process")
			}
			if err := lab.CheckLogs(); err != nil {
				t.Error(err)
			}
			t.Logf("shares %v, run took %s", ran, sub.Wall.Round(time.Millisecond))
			if tc.mdns {
				return
			}
			// The job introduced the peers to each other; restarted, they
			// forget, and a job joined to one peer runs on it alone.
			if err := lab.RestartPeers(ctx); err != nil {
				t.Fatal(err)
			}
			a := lab.Peers()[0]
			sub, err = lab.Submit(ctx, SubmitOptions{Spec: spec, Out: filepath.Join(dir, "out-a"), Join: []string{a.Addr}})
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range sub.Report.Tasks {
				if task.Peer != a.Name {
					t.Fatalf("task %s ran on %s, want only %s", task.ID, task.Peer, a.Name)
				}
			}
		})
	}
}

// TestLabQuota checks that a peer's quota caps the CPU of what it runs:
// a shell loop started in its cgroup, as the peer's plugins would be.
func TestLabQuota(t *testing.T) {
	if err := LabAvailable(); err != nil {
		t.Skipf("no lab here: %v", err)
	}
	ctl, err := FindCPUController()
	if err != nil {
		t.Skipf("no cpu controller: %v", err)
	}
	name, err := LabName("0-quota-test")
	if err != nil {
		t.Fatal(err)
	}
	cg, err := newCPUCgroups(ctl, name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cg.remove(); err != nil {
			t.Error(err)
		}
	}()
	procs, err := cg.add("spin", 0.25)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start("/bin/sh", []string{"-c", `echo $$ > "$0" && exec sh -c 'while :; do :; done'`, procs}, Options{Name: "spin"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	// The shell moves itself into the cgroup, then becomes the loop.
	pid := strconv.Itoa(p.Pid())
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, _ := os.ReadFile(procs)
		cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		if slices.Contains(strings.Fields(string(b)), pid) && strings.Contains(string(cmd), "while") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loop (pid %s) was not running in its cgroup after 5s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c0, err := ProcCPU(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	const span = time.Second
	time.Sleep(span)
	c1, err := ProcCPU(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	used := float64(c1-c0) / float64(span)
	if used > 0.35 || used < 0.1 {
		t.Errorf("a 0.25-core quota let the loop use %.2f cores", used)
	}
	if _, d := cg.throttled("spin"); d == 0 {
		t.Error("the cgroup was never throttled")
	}
	t.Logf("0.25-core quota: %.2f cores used", used)
}
