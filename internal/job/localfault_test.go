package job

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"syscall"
	"testing"

	"github.com/p2pc/p2pc/internal/blocks"
)

func TestDiskFaults(t *testing.T) {
	for _, c := range []struct {
		name  string
		err   error
		local bool
		text  string
	}{
		{"full store while fetching", fmt.Errorf("store block 1: put block 1: %w", &fs.PathError{Op: "write", Path: "/d/x", Err: syscall.ENOSPC}), true, "block store /d/store: no space left on device"},
		{"read-only", fmt.Errorf("export: %w", &fs.PathError{Op: "open", Path: "/d/x", Err: syscall.EROFS}), true, "block store /d/store: read-only file system"},
		{"over quota", syscall.EDQUOT, true, "block store /d/store: disk quota exceeded"},
		{"not writable", syscall.EACCES, true, "block store /d/store: permission denied"},
		{"peer went away", fmt.Errorf("fetch: %w", syscall.ECONNRESET), false, ""},
		{"peer sent bad data", fmt.Errorf("fetch: %w", blocks.ErrCorrupt), false, ""},
		{"no error", nil, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &runner{log: slog.New(slog.DiscardHandler), faulted: make(chan struct{})}
			got := r.diskErr("block store /d/store", c.err)
			if local := errors.Is(got, ErrLocalDisk); local != c.local {
				t.Fatalf("diskErr(%v) = %v: local %v, want %v", c.err, got, local, c.local)
			}
			if !c.local {
				if got != c.err {
					t.Errorf("diskErr changed a peer's error: %v", got)
				}
				if r.fault.Load() != nil {
					t.Error("the run was stopped for a peer's error")
				}
				return
			}
			if got.Error() != c.text || !errors.Is(got, c.err) {
				t.Errorf("error %q (wraps the cause: %v), want %q", got, errors.Is(got, c.err), c.text)
			}
			select {
			case <-r.faulted:
			default:
				t.Error("the run was not told to stop")
			}
			// A second fault keeps the first and closes nothing twice.
			r.diskErr("output folder /o", syscall.ENOSPC)
			if r.fault.Load().where != "block store /d/store" {
				t.Errorf("first fault replaced by %q", r.fault.Load().where)
			}
		})
	}
}
