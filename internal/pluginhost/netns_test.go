//go:build linux

package pluginhost

import (
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/sandbox"
)

// netnsOf names the network namespace of process pid ("net:[inode]").
func netnsOf(t *testing.T, pid int) string {
	t.Helper()
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		t.Fatalf("network namespace of %d: %v", pid, err)
	}
	return ns
}

// twoPIDs runs two tasks at once in pl (size 2), so that it starts two
// processes, and returns their pids. Each task must last longer than a
// start for the other to start a process of its own: a round whose tasks
// shared one process (a slow start: a loaded machine, the race detector)
// is run again with tasks twice as long, a bounded number of times.
func twoPIDs(t *testing.T, pl *Pool) [2]int {
	t.Helper()
	var pids [2]int
	for ms := 300; ms <= 4800; ms *= 2 {
		var wg sync.WaitGroup
		for i := range pids {
			wg.Go(func() {
				res, err := pl.Run(t.Context(), req("pid", params{Op: "pid", MS: ms}), nil, 20*time.Second)
				if err != nil {
					t.Errorf("run: %v", err)
					return
				}
				pids[i], _ = strconv.Atoi(string(res.Data))
			})
		}
		wg.Wait()
		if t.Failed() || pids[0] != pids[1] {
			return pids
		}
		t.Logf("tasks of %d ms both ran in process %d: again, longer", ms, pids[0])
	}
	t.Fatalf("both tasks ran in process %d, want two processes", pids[0])
	return pids
}

// TestPoolSharesItsNetworkNamespace: the processes of one pool (one job
// on one peer) share one private network namespace, made once; another
// pool's processes are in another; none is in the host's.
func TestPoolSharesItsNetworkNamespace(t *testing.T) {
	if !sandbox.Probe().NetNS {
		t.Skipf("no network namespaces here (%s)", sandbox.Probe())
	}
	pool := func() *Pool {
		cfg, _ := testConfig(t, "task")
		pl := NewPool(cfg, 2)
		t.Cleanup(func() { pl.Close() })
		return pl
	}
	a, b := pool(), pool()
	pa, pb := twoPIDs(t, a), twoPIDs(t, b)
	// This thread's: the main thread (whose namespace /proc/PID/ns/net
	// shows) may be one that a locked goroutine left in a namespace (the
	// Go runtime parks the main thread for good instead of ending it).
	host, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	na0, na1, nb0 := netnsOf(t, pa[0]), netnsOf(t, pa[1]), netnsOf(t, pb[0])
	if na0 != na1 {
		t.Errorf("one pool's processes in two namespaces: %s, %s", na0, na1)
	}
	if na0 == host || nb0 == host {
		t.Errorf("a process in the host's network namespace %s", host)
	}
	if na0 == nb0 {
		t.Errorf("two pools share the network namespace %s", na0)
	}
	if nb1 := netnsOf(t, pb[1]); nb1 != nb0 {
		t.Errorf("one pool's processes in two namespaces: %s, %s", nb0, nb1)
	}
}
