package job

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/p2pc/p2pc/internal/blocks"
)

// ErrLocalDisk: the submitter's own output folder or block store cannot
// be written (full, over quota, read-only, or not writable). Nobody else
// is to blame and no retry helps, so the run stops at once: what is in
// the output folder is complete, and a rerun once the cause is fixed
// resumes with the tasks already done.
var ErrLocalDisk = errors.New("local disk fault")

// localDisk is an error of this machine's own disk found elsewhere than
// where outputs are written (the job database): it says what err says,
// and is ErrLocalDisk too.
type localDisk struct{ error }

func (e localDisk) Unwrap() []error { return []error{e.error, ErrLocalDisk} }

// diskFault is a failed write to the submitter's own disk.
type diskFault struct {
	where string // "output folder DIR" or "block store DIR"
	errno syscall.Errno
	err   error
}

func (e *diskFault) Error() string { return fmt.Sprintf("%s: %v", e.where, e.errno) }

func (e *diskFault) Unwrap() []error { return []error{e.err, ErrLocalDisk} }

// LocalDisk says whether err is a write this machine's disk refused
// (full, over quota, read-only, not writable): exit code 4 of the CLI.
func LocalDisk(err error) bool {
	_, ok := localDiskErrno(err)
	return ok
}

// localDiskErrno reports whether err is one of the errors of a disk that
// cannot take writes, whoever tries.
func localDiskErrno(err error) (syscall.Errno, bool) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return 0, false
	}
	switch errno {
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EACCES:
		return errno, true
	}
	return 0, false
}

// outputFault returns err as a fault of the output folder (and stops the
// run) if it is one; otherwise err.
func (r *runner) outputFault(err error) error {
	return r.diskErr("output folder "+r.p.OutDir, err)
}

// storeFault is outputFault for the block store.
func (r *runner) storeFault(st blocks.Store, err error) error {
	where := "block store"
	if d, ok := st.(interface{ Dir() string }); ok {
		where += " " + d.Dir()
	}
	return r.diskErr(where, err)
}

func (r *runner) diskErr(where string, err error) error {
	if err == nil || errors.Is(err, ErrLocalDisk) {
		return err
	}
	errno, ok := localDiskErrno(err)
	if !ok {
		return err
	}
	f := &diskFault{where: where, errno: errno, err: err}
	if r.fault.CompareAndSwap(nil, f) {
		r.log.Error("cannot write to this machine's disk; stopping the run", "where", where, "err", err)
		close(r.faulted)
	}
	return f
}

// probeOutput checks that the output folder still takes a small write; a
// failed local attempt calls it, since a plugin reports the disk it could
// not write to only as text.
func (r *runner) probeOutput() error {
	f, err := os.CreateTemp(r.workRoot, "probe-*")
	if err == nil {
		_, err = f.Write(make([]byte, 64<<10))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		os.Remove(f.Name())
	}
	if err != nil {
		return r.outputFault(fmt.Errorf("probe %s: %w", filepath.Base(r.workRoot), err))
	}
	return nil
}
