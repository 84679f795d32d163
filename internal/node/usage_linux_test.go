package node

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestTreeUsage: the CPU time and resident memory of a process and of
// the processes it started.
func TestTreeUsage(t *testing.T) {
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Skip("no sleep to start:", err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	} // some CPU time to count
	cpu, rss := treeUsage([]int{os.Getpid()})
	_, childRSS := treeUsage([]int{child.Process.Pid})
	self, selfRSS := treeUsage([]int{os.Getpid(), os.Getpid()}) // counted once
	if cpu <= 0 || rss <= 0 || childRSS <= 0 {
		t.Fatalf("cpu %s, rss %d, child's rss %d: want them above 0", cpu, rss, childRSS)
	}
	if rss < childRSS || selfRSS > rss+rss/2 || self < cpu {
		t.Errorf("the tree's rss %d does not hold its child's %d, or a pid was counted twice (%d)", rss, childRSS, selfRSS)
	}
	if _, r := treeUsage([]int{1 << 30}); r != 0 {
		t.Errorf("a process that does not exist has rss %d", r)
	}
}
