package job

import "errors"

// Error classes that decide the CLI's exit code.
var (
	// ErrBadInput: the spec, the plugin, the inputs or the output folder
	// are not usable. Nothing ran.
	ErrBadInput = errors.New("bad input")
	// ErrTasksFailed: the job ran, but some tasks failed after their retries.
	ErrTasksFailed = errors.New("tasks failed")
)

// badInput wraps err so that errors.Is(err, ErrBadInput) holds while the
// message stays err's own.
type badInput struct{ err error }

func (e badInput) Error() string   { return e.err.Error() }
func (e badInput) Unwrap() []error { return []error{e.err, ErrBadInput} }

func bad(err error) error { return badInput{err} }
