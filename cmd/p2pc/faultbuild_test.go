package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// TestFaultFlagsOnlyInTestBuilds: the fault-injection flags exist in the
// binary the tests build (harness.Build, tag p2pcfault) and are unknown
// flags in the release build (`go build ./cmd/p2pc`). An argument of the
// wrong type tells them apart without starting anything: the test build
// parses the flag and rejects its value, the release does not know it.
func TestFaultFlagsOnlyInTestBuilds(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	release := filepath.Join(t.TempDir(), "p2pc")
	if err := harness.BuildRelease(ctx, repoRoot, release); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args    []string
		value   string // the flag whose value the test build rejects
		unknown string // the first flag the release does not know
	}{
		{[]string{"join", "--fault-forge=x"}, "--fault-forge", "--fault-forge"},
		{[]string{"join", "--fault-ghost-id=a", "--fault-lie-rate=x"}, "--fault-lie-rate", "--fault-ghost-id"},
		{[]string{"join", "--fault-ghost=a", "--fault-malformed", "--fault-lie-collude", "--fault-forge=x"}, "--fault-forge", "--fault-ghost"},
		{[]string{"blocks", "serve", "--fault-corrupt", "--fault-truncate", "--fault-stall-after=x"}, "--fault-stall-after", "--fault-corrupt"},
	}
	for _, c := range cases {
		cmd := "p2pc " + strings.Join(c.args, " ")
		test := runBin(t, p2pcBin, c.args)
		if want := c.value + ": expected"; test.code != exitBadInput || !strings.Contains(test.stderr, want) {
			t.Errorf("test build, %s: exit %d, want %d and %q; stderr:\n%s", cmd, test.code, exitBadInput, want, test.stderr)
		}
		rel := runBin(t, release, c.args)
		if want := "unknown flag " + c.unknown; rel.code != exitBadInput || !strings.Contains(rel.stderr, want) {
			t.Errorf("release build, %s: exit %d, want %d and %q; stderr:\n%s", cmd, rel.code, exitBadInput, want, rel.stderr)
		}
	}
}

// runBin runs bin with args on a fresh data folder and waits up to a minute.
func runBin(t *testing.T, bin string, args []string) result {
	t.Helper()
	p, err := harness.Start(bin, append([]string{"--data", t.TempDir()}, args...), harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return result{code, p.Stdout(), p.Stderr()}
}
