package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBuild: Build puts a working p2pc with the fault switches at out and
// nothing else beside it; a second Build (the Go build cache's binary)
// replaces it whole; a build that fails says so and leaves nothing.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds p2pc")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	out := filepath.Join(dir, "p2pc")
	for i := range 2 {
		if err := Build(ctx, root, out, false); err != nil {
			t.Fatalf("build %d: %v", i+1, err)
		}
		if b, err := exec.Command(out, "version").CombinedOutput(); err != nil || !strings.HasPrefix(string(b), "p2pc ") {
			t.Fatalf("build %d: p2pc version: %v\n%s", i+1, err, b)
		}
		// Only the test build knows the fault switches: it rejects the
		// value, where the release says the flag is unknown.
		b, _ := exec.Command(out, "--data", t.TempDir(), "join", "--fault-forge=x").CombinedOutput()
		if !strings.Contains(string(b), "--fault-forge: expected") {
			t.Errorf("build %d: join --fault-forge=x: the build lacks the %s tag:\n%s", i+1, FaultTag, b)
		}
		if left, _ := os.ReadDir(dir); len(left) != 1 {
			t.Errorf("build %d left %d files in the folder, want only p2pc", i+1, len(left))
		}
	}

	bad := t.TempDir() // no go.mod: nothing to build
	out = filepath.Join(dir, "nothing")
	if err := Build(ctx, bad, out, false); err == nil || !strings.Contains(err.Error(), "build p2pc") {
		t.Errorf("a build in a folder without the module: %v, want an error that says build p2pc", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("the failed build left %d files, want only the first p2pc", len(left))
	}
}
