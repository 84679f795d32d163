//go:build linux

package sandbox

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cpuNow is this process's user + system CPU time so far.
func cpuNow() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStartPhases: what one confined start and stop of a trivial
// process (/bin/true) costs, phase by phase, and the whole of it
// confined and not. Each phase runs as the plugin host runs it: on a
// fresh locked thread where the phase confines the thread. cpu-us/op is
// this process's CPU (the kernel's asynchronous teardown of a network
// namespace is not in it); steadier than ns/op on a shared machine.
//
//	go test ./internal/sandbox -run '^$' -bench StartPhases -benchtime 100x -count 5
func BenchmarkStartPhases(b *testing.B) {
	st := Probe()
	pol := Policy{ReadWrite: []string{b.TempDir()}}
	cpu := func(b *testing.B, run func(b *testing.B)) {
		b.Helper()
		c0 := cpuNow()
		run(b)
		b.ReportMetric(float64((cpuNow()-c0).Microseconds())/float64(b.N), "cpu-us/op")
	}
	b.Run("thread", func(b *testing.B) { // the floor of the thread phases below
		cpu(b, func(b *testing.B) {
			for b.Loop() {
				onFreshThread(func() error { return nil })
			}
		})
	})
	b.Run("netns-unshare", func(b *testing.B) {
		if !st.NetNS {
			b.Skip("no network namespaces here")
		}
		cpu(b, func(b *testing.B) {
			for b.Loop() {
				if err := onFreshThread(func() error { return unix.Unshare(unix.CLONE_NEWNET) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("netns-join", func(b *testing.B) {
		if !st.NetNS {
			b.Skip("no network namespaces here")
		}
		ns, err := newNetNS()
		if err != nil {
			b.Fatal(err)
		}
		defer ns.close()
		cpu(b, func(b *testing.B) {
			for b.Loop() {
				if err := onFreshThread(ns.join); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("ruleset-build", func(b *testing.B) {
		if st.LandlockABI < 1 {
			b.Skip("no Landlock here")
		}
		cpu(b, func(b *testing.B) {
			for b.Loop() {
				fd, err := ruleset(st.LandlockABI, pol)
				if err != nil {
					b.Fatal(err)
				}
				unix.Close(fd)
			}
		})
	})
	b.Run("ruleset-restrict", func(b *testing.B) { // a built ruleset applied to a thread
		if st.LandlockABI < 1 {
			b.Skip("no Landlock here")
		}
		fd, err := ruleset(st.LandlockABI, pol)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
		cpu(b, func(b *testing.B) {
			for b.Loop() {
				err := onFreshThread(func() error {
					if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
						return err
					}
					_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0)
					return errnoErr(errno)
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("seccomp", func(b *testing.B) {
		if !st.Seccomp {
			b.Skip("no seccomp here")
		}
		cpu(b, func(b *testing.B) {
			for b.Loop() {
				err := onFreshThread(func() error {
					if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
						return err
					}
					return installSeccomp(false)
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	haveCgroups := Cgroups().Version != 0
	b.Run("cgroup-create", func(b *testing.B) {
		if !haveCgroups {
			b.Skip("no cgroups here")
		}
		var made []*Cgroup
		cpu(b, func(b *testing.B) {
			for b.Loop() {
				c, err := NewCgroup(Limits{})
				if err != nil {
					b.Fatal(err)
				}
				made = append(made, c)
			}
		})
		for _, c := range made {
			c.Close()
		}
	})
	b.Run("cgroup-remove", func(b *testing.B) { // Close of an empty cgroup
		if !haveCgroups {
			b.Skip("no cgroups here")
		}
		var spent time.Duration
		for b.Loop() {
			b.StopTimer()
			c, err := NewCgroup(Limits{})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			c0 := cpuNow()
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
			spent += cpuNow() - c0
		}
		b.ReportMetric(float64(spent.Microseconds())/float64(b.N), "cpu-us/op")
	})
	// A thread's move into a v1 cgroup and back, as StartConfined makes
	// it, after a pause of 50 ms (a p2pc run starts its first plugin
	// after a while without moves): named by its TID, the kernel takes
	// the lock that waits for an RCU grace period; named "0" (itself),
	// it does not.
	for _, who := range []string{"tid", "self"} {
		b.Run("cgroup-join-"+who, func(b *testing.B) {
			t, _ := cgroupRoot()
			if t == nil || t.version != 1 {
				b.Skip("no cgroup v1 tree here")
			}
			for b.Loop() {
				b.StopTimer()
				c, err := NewCgroup(Limits{})
				if err != nil {
					b.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
				b.StartTimer()
				err = onFreshThread(func() error {
					id := "0"
					if who == "tid" {
						id = strconv.Itoa(unix.Gettid())
					}
					for _, d := range folders(c.dirs) {
						if err := writeFile(filepath.Join(d, "tasks"), id); err != nil {
							return err
						}
					}
					for _, d := range folders(t.home) {
						if err := writeFile(filepath.Join(d, "tasks"), id); err != nil {
							return err
						}
					}
					return nil
				})
				b.StopTimer()
				c.Close()
				b.StartTimer()
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("fork-exec", func(b *testing.B) { // /bin/true started and reaped, nothing else
		cpu(b, func(b *testing.B) {
			for b.Loop() {
				if err := exec.Command("/bin/true").Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	// The whole start and stop: each process confined afresh (a new
	// namespace and ruleset, as before Confinement was shared), as the
	// plugin host confines the processes of one pool (one Confinement),
	// and unconfined.
	whole := func(b *testing.B, confined, shared bool) {
		if !confined {
			b.Cleanup(DisableForTest())
		}
		conf := NewConfinement(pol)
		defer conf.Close()
		cpu(b, func(b *testing.B) {
			for b.Loop() {
				var c *Cgroup
				if confined && haveCgroups {
					var err error
					if c, err = NewCgroup(Limits{}); err != nil {
						b.Fatal(err)
					}
				}
				if !shared {
					conf.Close()
				}
				cmd := exec.Command("/bin/true")
				err := onFreshThread(func() error {
					if _, err := StartConfined(cmd, conf, c, Limits{}); err != nil {
						return err
					}
					return cmd.Wait()
				})
				if err != nil {
					b.Fatal(err)
				}
				if c != nil {
					if err := c.Close(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
	b.Run("tree-remove", func(b *testing.B) { // CloseCgroups at a p2pc's exit
		if !haveCgroups {
			b.Skip("no cgroups here")
		}
		var spent time.Duration
		for b.Loop() {
			b.StopTimer()
			Cgroups()
			b.StartTimer()
			c0 := cpuNow()
			if err := CloseCgroups(); err != nil {
				b.Fatal(err)
			}
			spent += cpuNow() - c0
		}
		b.ReportMetric(float64(spent.Microseconds())/float64(b.N), "cpu-us/op")
	})
	b.Run("whole-confined-fresh", func(b *testing.B) { whole(b, true, false) })
	b.Run("whole-confined-pool", func(b *testing.B) { whole(b, true, true) })
	b.Run("whole-unconfined", func(b *testing.B) { whole(b, false, true) })
}
