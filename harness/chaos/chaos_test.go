package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/p2pc/p2pc/harness"
)

var (
	binOnce sync.Once
	binDir  string
	bin     string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// testEnv builds p2pc once for the package's tests.
func testEnv(t *testing.T) *Env {
	t.Helper()
	if err := harness.LabAvailable(); err != nil {
		t.Skipf("no lab here: %v", err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "chaos-bin-")
		if binErr != nil {
			return
		}
		bin = filepath.Join(binDir, "p2pc")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		binErr = harness.Build(ctx, root, bin, false)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return &Env{Bin: bin, Root: root, Dir: t.TempDir(), Logf: t.Logf}
}

// TestScenarios runs every scenario once (-short: the short ones).
func TestScenarios(t *testing.T) {
	for _, s := range Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			if testing.Short() && !s.Short {
				t.Skip("slow scenario; runs without -short")
			}
			e := testEnv(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			start := time.Now()
			out, err := e.Run(ctx, s)
			if out != nil {
				t.Logf("%s: exit %d, job %s, recover %s, lost %d, %v (scenario %s)", s.Name, out.Exit, out.Wall.Round(time.Millisecond),
					out.Recover.Round(time.Millisecond), out.Lost, out.Notes, time.Since(start).Round(time.Millisecond))
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDocsNameEveryScenario keeps docs/chaos.md true: it has a row for
// every scenario.
func TestDocsNameEveryScenario(t *testing.T) {
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "chaos.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Scenarios() {
		if !strings.Contains(string(b), "| `"+s.Name+"` |") {
			t.Errorf("docs/chaos.md has no row for scenario %s", s.Name)
		}
		if s.Doc == "" {
			t.Errorf("scenario %s has no Doc", s.Name)
		}
	}
	if _, err := Find("nope"); err == nil {
		t.Error("Find accepted an unknown scenario")
	}
}
