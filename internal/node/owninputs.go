package node

import (
	"fmt"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/plain"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// ownInput is an input that only the tasks whose lease names it see
// (Hello.own_inputs, Lease.inputs): fetched when the first such lease
// runs, not when the session starts.
type ownInput struct {
	ref  *peerpb.FileRef
	file sdk.File

	mu    sync.Mutex // held while it is fetched
	ready bool       // fetched (or reused from an earlier session)
}

// fetchOwn fetches the inputs of their own that the leases of batch name
// and this session lacks, and returns the leases that have all of theirs.
// A lease whose input could not be fetched ends here as lost (the peer's
// fault, not the task's): the coordinator runs it again.
func (s *session) fetchOwn(batch []*queued) []*queued {
	kept := batch[:0]
	for _, it := range batch {
		if err := s.fetchOwnOf(it); err != nil {
			now := time.Now().UnixNano()
			s.log.Warn("an input of the task could not be fetched", "task", it.lease.TaskId, "err", err)
			s.finish(it, &peerpb.Result{LeaseId: it.lease.LeaseId, Outcome: report.OutcomeLost, Error: plain.Error(err).Error(), StartedUnixNano: now, EndedUnixNano: now})
			continue
		}
		kept = append(kept, it)
	}
	return kept
}

func (s *session) fetchOwnOf(it *queued) error {
	for _, i := range it.lease.Inputs {
		if int(i) >= len(s.own) {
			return fmt.Errorf("the lease names input %d of %d inputs of tasks' own", i, len(s.own))
		}
		in := s.own[i]
		in.mu.Lock()
		if !in.ready {
			if err := s.fetchFile(it.ctx, in.ref, in.file.Path, 0o444); err != nil {
				in.mu.Unlock()
				return fmt.Errorf("input %s: %w", in.file.Name, err)
			}
			in.ready = true
		}
		in.mu.Unlock()
	}
	return nil
}

// taskInputs are the inputs lease l's task sees: the job's shared ones,
// then those of its own that the lease names (fetchOwn checked them).
func (s *session) taskInputs(l *peerpb.Lease) []sdk.File {
	if len(l.Inputs) == 0 {
		return s.inputs
	}
	files := make([]sdk.File, len(s.inputs), len(s.inputs)+len(l.Inputs))
	copy(files, s.inputs)
	for _, i := range l.Inputs {
		if int(i) < len(s.own) {
			files = append(files, s.own[i].file)
		}
	}
	return files
}
