package node

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// treeUsage sums the CPU time (utime+stime, and that of the children
// they waited for) and the resident memory of the processes pids and
// of every process they started that still lives.
func treeUsage(pids []int) (cpu time.Duration, rss int64) {
	page := int64(os.Getpagesize())
	seen := map[int]bool{}
	for len(pids) > 0 {
		pid := pids[len(pids)-1]
		pids = pids[:len(pids)-1]
		if seen[pid] || len(seen) > 4096 {
			continue
		}
		seen[pid] = true
		dir := "/proc/" + strconv.Itoa(pid)
		if b, err := os.ReadFile(dir + "/stat"); err == nil {
			cpu += time.Duration(statTicks(b, 4) * clockTick)
		}
		if b, err := os.ReadFile(dir + "/statm"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 1 {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				rss += n * page
			}
		}
		tasks, _ := os.ReadDir(dir + "/task")
		for _, t := range tasks {
			b, err := os.ReadFile(dir + "/task/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, c := range strings.Fields(string(b)) {
				if cp, err := strconv.Atoi(c); err == nil {
					pids = append(pids, cp)
				}
			}
		}
	}
	return cpu, rss
}
