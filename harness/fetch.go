package harness

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// FetchModules downloads the requirements of the module at dir into the
// module cache (`go mod download`: every module its go.mod lists, for
// every platform). A test binary that re-executes itself in a private
// network namespace (MainInNetns), where nothing reaches the Go module
// proxy, calls it first, so that the go commands its tests run there find
// what they need in the cache however cold it was.
func FetchModules(ctx context.Context, dir string) error {
	cmd := exec.CommandContext(ctx, "go", "mod", "download")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go mod download in %s: %w\n%s%s", dir, err, out, ProxyHint(ctx))
	}
	return nil
}

// ProxyHint says where the go command fetches modules from, for an error
// about a download that failed.
func ProxyHint(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "go", "env", "GOPROXY").Output()
	if err != nil {
		return "(is the Go module proxy reachable?)"
	}
	return fmt.Sprintf("(is the Go module proxy reachable? GOPROXY=%s)", strings.TrimSpace(string(out)))
}
