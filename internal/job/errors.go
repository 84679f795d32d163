package job

import (
	"errors"
	"fmt"
)

// Error classes that decide the CLI's exit code.
var (
	// ErrBadInput: the spec, the plugin, the inputs or the output folder
	// are not usable. Nothing ran.
	ErrBadInput = errors.New("bad input")
	// ErrTasksFailed: the job ran, but some tasks failed after their retries.
	ErrTasksFailed = errors.New("tasks failed")
	// ErrStalled: work remained that no worker could take for
	// RunOptions.StallAfter (the error says why). It wraps
	// ErrTasksFailed: the job did not complete; a rerun resumes it.
	ErrStalled = fmt.Errorf("job stalled: %w", ErrTasksFailed)
)

// badInput wraps err so that errors.Is(err, ErrBadInput) holds while the
// message stays err's own.
type badInput struct{ err error }

func (e badInput) Error() string   { return e.err.Error() }
func (e badInput) Unwrap() []error { return []error{e.err, ErrBadInput} }

func bad(err error) error { return badInput{err} }
