//go:build linux

package sandbox

import (
	"os"
	"testing"
)

func TestStatusUIDThreads(t *testing.T) {
	for _, c := range []struct {
		in      string
		uid     uint32
		threads int
		ok      bool
	}{
		{"Name:\tsleep\nUid:\t65534\t65534\t65534\t65534\nThreads:\t1\n", 65534, 1, true},
		{"Uid:\t1000\t0\t0\t0\nThreads:\t12\n", 1000, 12, true}, // the real one counts
		{"Name:\tx\nThreads:\t3\n", 0, 3, false},
		{"", 0, 1, false},
	} {
		uid, threads, ok := statusUIDThreads([]byte(c.in))
		if uid != c.uid || threads != c.threads || ok != c.ok {
			t.Errorf("%q: %d %d %v, want %d %d %v", c.in, uid, threads, ok, c.uid, c.threads, c.ok)
		}
	}
	if n := userTasks(uint32(os.Getuid())); n < 1 {
		t.Errorf("userTasks of this process's user: %d, want at least this process", n)
	}
}
