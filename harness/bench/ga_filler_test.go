package bench

import (
	"os"
	"testing"

	"github.com/p2pc/p2pc/harness"
)

// TestCoreFiller: the filler's spinners are seen running under SCHED_IDLE
// in its cgroup, and stop removes them with it.
func TestCoreFiller(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a cgroup")
	}
	if _, err := harness.FindCPUController(); err != nil {
		t.Skipf("no cpu cgroup controller: %v", err)
	}
	f, err := startCoreFiller([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	dir := f.dir
	f.stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("stop left the cgroup %s: %v", dir, err)
	}
}
