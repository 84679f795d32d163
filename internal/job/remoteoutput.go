package job

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/job/sched"
	"github.com/p2pc/p2pc/internal/outputs"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/phasetrace"
	"github.com/p2pc/p2pc/internal/plain"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/transfer"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// Output checking: a peer's result is staged (inline, or fetched as
// blocks) and checked against the digest the peer gives before the queue
// sees it.

// settle turns a peer's result into a lease result (result) and settles
// the lease with it. It returns the lease, nil if it is unknown.
func (w *remoteWorker) settle(ctx context.Context, res *peerpb.Result) *sched.Lease {
	l, out, ok := w.result(ctx, res)
	if ok {
		w.s.q.Finish(l, out)
		phasetrace.Mark("c.settled", l.ID)
	}
	return l
}

// quick says whether res needs no fetch nor check of files (result does
// no I/O for it): a failure, or a small task's output inline.
func (w *remoteWorker) quick(res *peerpb.Result) bool {
	return res.Outcome != report.OutcomeOK || inlineOnly(res.Outputs) && !w.s.r.verifier
}

// settleAll settles the quick results of a batch (quick), together: one
// turn of the queue's lock and one batch of decisions for all of them
// (sched.Queue.FinishAll), then their acknowledgements.
func (w *remoteWorker) settleAll(ctx context.Context, rs []*peerpb.Result) {
	ls := make([]*sched.Lease, len(rs))
	var fl []*sched.Lease
	var outs []sched.Result
	for i, res := range rs {
		l, out, ok := w.result(ctx, res)
		ls[i] = l
		if ok {
			fl, outs = append(fl, l), append(outs, out)
		}
	}
	w.s.q.FinishAll(fl, outs)
	for i, res := range rs {
		if ls[i] != nil {
			phasetrace.Mark("c.settled", ls[i].ID)
		}
		w.settled(ls[i], res)
	}
}

// result turns a peer's result into a lease result: outputs are fetched
// (inline or as blocks), staged and checked against the peer's digest.
// It returns the lease (nil if it is unknown) and whether the lease is
// still to be settled with out (not when result settled it itself, as
// a verifier's rejection).
func (w *remoteWorker) result(ctx context.Context, res *peerpb.Result) (*sched.Lease, sched.Result, bool) {
	w.mu.Lock()
	l := w.leases[res.LeaseId]
	delete(w.leases, res.LeaseId)
	w.mu.Unlock()
	if l == nil {
		w.forged(res)
		return nil, sched.Result{}, false
	}
	out := sched.Result{Outcome: res.Outcome, Start: time.Unix(0, res.StartedUnixNano).UTC(), End: time.Unix(0, res.EndedUnixNano).UTC(), Device: res.Device}
	if res.EndedUnixNano == 0 {
		out.End = time.Now().UTC()
	}
	if res.Error != "" {
		out.Err = errors.New(res.Error)
	}
	switch res.Outcome {
	case report.OutcomeLost:
		out.Fault = sched.FaultLost // the peer says it lost the attempt
	case report.OutcomeOK, report.OutcomeTaskError, report.OutcomeCrashed, report.OutcomeTimeout, report.OutcomeCanceled:
	default:
		out.Outcome, out.Err, out.Fault = report.OutcomeLost, fmt.Errorf("peer %s sent an unknown outcome %q", w.peer.Name, res.Outcome), sched.FaultMalformed
	}
	if out.Outcome == report.OutcomeOK && l.DigestOnly {
		d, err := digest.FromBytes(res.Digest)
		if err != nil {
			out.Outcome, out.Err, out.Fault = report.OutcomeLost, fmt.Errorf("peer %s sent a bad digest: %w", w.peer.Name, err), sched.FaultMalformed
		} else {
			out.Digest = d
			out.Fetch = func(ctx context.Context, dir string) error {
				_, _, err := w.stage(ctx, dir, res)
				return err
			}
		}
	} else if out.Outcome == report.OutcomeOK && inlineOnly(res.Outputs) && !w.s.r.verifier {
		// The usual result of a small task: checked and kept in memory,
		// on to the job database without a folder.
		d, files, data, err := inlineResult(res)
		if err != nil {
			out.Outcome, out.Err, out.Fault = report.OutcomeLost, fmt.Errorf("collect output from %s: %w", w.peer.Name, err), sched.FaultMalformed
		} else {
			out.Inline, out.Digest, out.Files, out.Data = true, d, files, data
		}
	} else if out.Outcome == report.OutcomeOK {
		stage := filepath.Join(w.s.workRoot, l.TaskID+"."+strconv.FormatUint(l.ID, 10)+".out")
		d, files, err := w.stage(ctx, stage, res)
		if err == nil && w.s.r.verifier {
			if err = w.s.r.verifyOutput(ctx, l, stage, files); errors.Is(err, errRejected) {
				os.RemoveAll(stage)
				out.Outcome, out.Err = report.OutcomeRejected, err
				w.s.q.Finish(l, out)
				return l, out, false
			}
		}
		if err != nil {
			os.RemoveAll(stage)
			out.Outcome, out.Err = report.OutcomeLost, fmt.Errorf("collect output from %s: %w", w.peer.Name, plain.Error(err))
			switch {
			case ctx.Err() != nil, errors.Is(err, ErrLocalDisk):
				// The submitter's own disk: nobody's strike, and the run stops.
				out.Outcome = report.OutcomeCanceled
			case errors.Is(err, errMalformed):
				out.Fault = sched.FaultMalformed
			case errors.Is(err, errUndelivered):
				out.Fault = sched.FaultLost
			}
		} else {
			out.Stage, out.Digest, out.Files = stage, d, files
		}
	}
	return l, out, true
}

// forged charges the peer with a result for a lease it does not hold
// (never held, or already settled): a malformed result, logged the first
// time only (a liar may send them by the thousand).
func (w *remoteWorker) forged(res *peerpb.Result) {
	err := fmt.Errorf("%w: a result for lease %d, which the peer does not hold", errMalformed, res.LeaseId)
	excluded := w.s.q.Forged(w.peer.Name, err)
	if w.forgedSeen.CompareAndSwap(false, true) {
		w.s.r.log.Warn("peer sent a result for a lease it does not hold: a malformed result (logged once)", "peer", w.peer.Name, "lease", res.LeaseId, "excluded", excluded)
	}
}

// Why collecting a peer's output failed, when it is the peer's fault (a
// failure of the submitter's own disk is nobody's strike).
var (
	// errMalformed: the result contradicts itself (names, sizes, digest).
	errMalformed = errors.New("malformed result")
	// errUndelivered: the peer did not serve the output's blocks.
	errUndelivered = errors.New("output not delivered")
)

// maxInline bounds an inline output file; larger ones must travel as blocks.
const maxInline = 4 << 20

// stage gets a peer's output into the folder stage and checks it against
// the peer's digest. A write that fails for a reason of this machine's
// own disk (full, read-only) comes back wrapping ErrLocalDisk, and stops
// the run: the peer is not to blame.
func (w *remoteWorker) stage(ctx context.Context, stage string, res *peerpb.Result) (digest.ID, []string, error) {
	d, files, err := w.stageFiles(ctx, stage, res)
	return d, files, w.s.r.outputFault(err)
}

func (w *remoteWorker) stageFiles(ctx context.Context, stage string, res *peerpb.Result) (digest.ID, []string, error) {
	if inlineOnly(res.Outputs) {
		return stageInline(stage, res)
	}
	ro := w.s.r.opts.Remote
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return digest.ID{}, nil, err
	}
	root, err := os.OpenRoot(stage)
	if err != nil {
		return digest.ID{}, nil, err
	}
	defer root.Close()
	for _, o := range res.Outputs {
		if err := outputs.CheckName(o.Name); err != nil {
			return digest.ID{}, nil, fmt.Errorf("%w: %w", errMalformed, err)
		}
		name := filepath.Clean(filepath.FromSlash(o.Name))
		if !filepath.IsLocal(name) {
			return digest.ID{}, nil, fmt.Errorf("%w: output name %q is not a local path", errMalformed, o.Name)
		}
		if dir := filepath.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return digest.ID{}, nil, err
			}
		}
		switch {
		case len(o.FileId) == 0:
			if err := checkInline(o); err != nil {
				return digest.ID{}, nil, err
			}
			if err := root.WriteFile(name, o.Data, 0o644); err != nil {
				return digest.ID{}, nil, err
			}
		default:
			id, err := blocks.IDFromBytes(o.FileId)
			if err != nil {
				return digest.ID{}, nil, fmt.Errorf("%w: output %q: %w", errMalformed, o.Name, err)
			}
			f := transfer.NewFetcher(ro.Store, ro.Conns, transfer.FetchOptions{Logger: w.s.r.log})
			if _, err := f.Fetch(ctx, id, []string{w.peer.Addr}, nil); err != nil {
				if err := w.s.r.storeFault(ro.Store, err); errors.Is(err, ErrLocalDisk) {
					return digest.ID{}, nil, fmt.Errorf("output %q: %w", o.Name, err)
				}
				return digest.ID{}, nil, fmt.Errorf("%w: output %q: %w", errUndelivered, o.Name, err)
			}
			if err := blocks.ExportFile(ctx, ro.Store, id, filepath.Join(stage, name)); err != nil {
				return digest.ID{}, nil, fmt.Errorf("output %q: %w", o.Name, err)
			}
		}
	}
	d, files, err := outputs.Digest(stage)
	if err != nil {
		return digest.ID{}, nil, err
	}
	if !bytes.Equal(res.Digest, d[:]) {
		return digest.ID{}, nil, fmt.Errorf("%w: output digest mismatch: peer said %.6x, files hash to %.12s", errMalformed, res.Digest, d.String())
	}
	return d, files, nil
}

// inlineResult checks an output that is only inline data (or nothing)
// against the peer's digest, in memory: files is [sdk.DataFile], or none.
func inlineResult(res *peerpb.Result) (digest.ID, []string, []byte, error) {
	var data []byte
	var files []string
	if len(res.Outputs) == 1 {
		o := res.Outputs[0]
		if err := checkInline(o); err != nil {
			return digest.ID{}, nil, nil, err
		}
		data, files = o.Data, []string{sdk.DataFile}
		if data == nil {
			data = []byte{} // an empty data file, not none
		}
	}
	d := outputs.DigestInline(data)
	if !bytes.Equal(res.Digest, d[:]) {
		return digest.ID{}, nil, nil, fmt.Errorf("%w: output digest mismatch: peer said %.6x, data hashes to %.12s", errMalformed, res.Digest, d.String())
	}
	return d, files, data, nil
}

// stageInline stages an output that is only inline data (or nothing),
// for the plugin's Verify or a fetch, with the fewest file system calls
// (mkdir, create, write, close).
func stageInline(stage string, res *peerpb.Result) (digest.ID, []string, error) {
	d, files, data, err := inlineResult(res)
	if err != nil {
		return digest.ID{}, nil, err
	}
	if err := os.Mkdir(stage, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return digest.ID{}, nil, err
	}
	if files != nil {
		if err := os.WriteFile(filepath.Join(stage, sdk.DataFile), data, 0o644); err != nil {
			return digest.ID{}, nil, err
		}
	}
	return d, files, nil
}

// checkInline checks an inline output's size against its claim and the
// inline bound.
func checkInline(o *peerpb.Output) error {
	if len(o.Data) > maxInline || int64(len(o.Data)) != o.Size {
		return fmt.Errorf("%w: output %q: inline size %d does not match %d", errMalformed, o.Name, len(o.Data), o.Size)
	}
	return nil
}

// inlineOnly: the output is nothing, or just the inline data file.
func inlineOnly(outs []*peerpb.Output) bool {
	return len(outs) == 0 || (len(outs) == 1 && outs[0].Name == sdk.DataFile && len(outs[0].FileId) == 0)
}
