package main

import (
	"strings"
	"testing"
)

// TestBenchPublish: `p2pc bench --publish`, the one way to write the
// repository's results/, takes only full runs and no other folder; both
// refusals come before anything is built or measured, root or not.
func TestBenchPublish(t *testing.T) {
	parallel(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--quick", "--publish"}, "--publish takes full runs only"},
		{[]string{"bench", "--publish", "--out", t.TempDir()}, "--out names another folder"},
	} {
		r := p2pcEnv(t, nil, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("p2pc %s: exit %d, want 2 saying %q\n%s", strings.Join(c.args, " "), r.code, c.want, r.stderr)
		}
	}
}
