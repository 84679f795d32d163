package pluginhost

import (
	"context"
	"errors"

	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// Classify maps the error of a Pool call (Run, Reduce, Verify) made with
// ctx to a report outcome: ok, canceled (ctx ended), timeout, task_error
// (the task's own failure, or a resource limit it exceeded: sandbox.ErrLimit) or crashed (the plugin process failed).
func Classify(ctx context.Context, err error) string {
	var te *sdk.TaskError
	switch {
	case err == nil:
		return report.OutcomeOK
	case ctx.Err() != nil:
		return report.OutcomeCanceled
	case errors.Is(err, ErrTimeout):
		return report.OutcomeTimeout
	case errors.As(err, &te), errors.Is(err, sandbox.ErrLimit):
		return report.OutcomeTaskError
	default:
		return report.OutcomeCrashed
	}
}
