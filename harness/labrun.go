package harness

import (
	"bytes"
	"context"
	"fmt"
	"strings"
)

// RunP2PC runs the lab's p2pc with args in the submitter's namespace
// (P2PCCommand) and returns its stdout; when it does not exit 0 the
// error says so with the end of its stderr.
func (l *Lab) RunP2PC(ctx context.Context, args ...string) (string, error) {
	cmd, err := l.P2PCCommand(ctx, args...)
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("p2pc %s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String(), 1500))
	}
	return stdout.String(), nil
}
