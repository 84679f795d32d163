package job

import "errors"

// Error classes that decide the CLI's exit code.
var (
	// ErrBadInput: the spec, the plugin, the inputs or the output folder
	// are not usable. Nothing ran.
	ErrBadInput = errors.New("bad input")
	// ErrTasksFailed: the job ran, but some tasks failed after their retries.
	ErrTasksFailed = errors.New("tasks failed")
	// ErrStalled: work remained that no worker could take for
	// RunOptions.WaitPeers (the error says why, and how many tasks never
	// ran). No task need have failed: it is not ErrTasksFailed; the job
	// did not complete, and a rerun resumes it.
	ErrStalled = errors.New("job stalled")
)

// badInput wraps err so that errors.Is(err, ErrBadInput) holds while the
// message stays err's own.
type badInput struct{ err error }

func (e badInput) Error() string   { return e.err.Error() }
func (e badInput) Unwrap() []error { return []error{e.err, ErrBadInput} }

func bad(err error) error { return badInput{err} }
