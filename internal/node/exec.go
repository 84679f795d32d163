package node

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/phasetrace"
	"github.com/p2pc/p2pc/internal/plain"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/taskrun"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// exec runs a batch of leases in a slot (called by the scheduler, one
// call at a time per slot), through the same path as the submitter's own
// slots (package taskrun): one plugin call where the plugin serves
// batches, each lease with its own outcome, and sends each result as soon
// as its task ends.
func (s *session) exec(batch []*queued, slot int) {
	if batch = s.fetchOwn(batch); len(batch) == 0 {
		return
	}
	if len(batch) > 1 {
		s.log.Debug("running a batch", "leases", len(batch), "slot", slot)
	}
	items := make([]taskrun.Item, len(batch))
	for i, it := range batch {
		l := it.lease
		phasetrace.Mark("p.exec", l.LeaseId)
		a := taskrun.Attempt{
			JobID:   s.hello.JobId,
			TaskID:  l.TaskId,
			Attempt: int(l.Attempt),
			Params:  l.Params,
			Inputs:  s.taskInputs(l),
			Timeout: s.timeout,
			Host:    newTunnelHost(s, l.LeaseId),
			Disk:    s.n.taskDisk(),
		}
		if !l.DigestOnly {
			a.InlineMax = inlineOutput // sent inline anyway: skip the disk
		}
		a.Tamper = s.n.tamper(l)
		items[i] = taskrun.Item{Ctx: it.ctx, Attempt: a}
	}
	pool, device := s.slotPool(slot)
	var work string
	next := func(clean bool) (string, error) {
		if work != "" && !clean {
			s.n.clearSlotDir(slot, work, false)
		}
		var err error
		work, err = s.n.slotDir(slot, s.job.work)
		return work, err
	}
	// The session's base (tasks may outlive a broken session, keep.go): a
	// lease revoked stops its own task only.
	clean := taskrun.RunBatch(s.base, pool, items, next, func(i int, out taskrun.Output) {
		it := batch[i]
		res := &peerpb.Result{LeaseId: it.lease.LeaseId, StartedUnixNano: out.Start.UnixNano(), EndedUnixNano: out.End.UnixNano(), Device: device}
		if out.Start.IsZero() {
			now := time.Now().UnixNano()
			res.StartedUnixNano, res.EndedUnixNano = now, now
		}
		err := out.Err
		if err == nil {
			err = s.collect(it.ctx, out, res, it.lease)
			out.Outcome = pluginhost.Classify(it.ctx, err)
		}
		if out.Stage != "" {
			os.RemoveAll(out.Stage)
		}
		res.Outcome = out.Outcome
		if err != nil {
			res.Error = plain.Error(err).Error()
			res.Outputs = nil
		}
		if out.Outcome == report.OutcomeCanceled && out.Start.IsZero() {
			res.Error = "canceled before it started"
		}
		if it.paused.Load() && res.Outcome != report.OutcomeOK { // volunteer.go
			res.Outcome, res.Error = report.OutcomeCanceled, errPausedLease
		}
		if phasetrace.On() && !out.Start.IsZero() {
			phasetrace.At("p.start", res.LeaseId, out.Start)
			phasetrace.At("p.end", res.LeaseId, out.End)
		}
		s.n.malform(res)
		s.n.serveCount(s.served, res.Outcome)
		if s.log.Enabled(it.ctx, slog.LevelDebug) {
			s.log.Debug("task ran", "task", it.lease.TaskId, "attempt", it.lease.Attempt, "outcome", res.Outcome)
		}
		s.finish(it, res)
	})
	if work != "" && !clean {
		s.n.clearSlotDir(slot, work, false)
	}
}

// collect fills res with the output's digest and files: small files
// inline, bigger ones as blocks in the store for the coordinator to fetch.
func (s *session) collect(ctx context.Context, out taskrun.Output, res *peerpb.Result, l *peerpb.Lease) error {
	res.Digest = out.Digest[:]
	if out.Inline {
		if out.Data != nil {
			sum := sha256.Sum256(out.Data)
			res.Outputs = []*peerpb.Output{{Name: sdk.DataFile, Size: int64(len(out.Data)), Digest: sum[:], Data: out.Data}}
		}
		return nil
	}
	for _, name := range out.Files {
		path := filepath.Join(out.Stage, filepath.FromSlash(name))
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		o := &peerpb.Output{Name: name, Size: fi.Size()}
		if fi.Size() <= inlineOutput && !l.DigestOnly {
			if o.Data, err = os.ReadFile(path); err != nil {
				return err
			}
		} else {
			_, id, err := blocks.PutPath(ctx, s.n.store, path, blocks.DefaultBlockSize)
			if err != nil {
				return fmt.Errorf("store output %s: %w", name, s.n.storeFull(err))
			}
			o.FileId = id[:]
			if err := s.n.store.Pin("job-"+s.hello.JobId, id); err != nil {
				return fmt.Errorf("store output %s: %w", name, err)
			}
		}
		res.Outputs = append(res.Outputs, o)
	}
	return nil
}
