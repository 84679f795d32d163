package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
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
	for _, ref := range it.lease.Files {
		in, err := s.leaseFiles.get(s, ref)
		if err != nil {
			return err
		}
		if err := s.fetchInput(it.ctx, in); err != nil {
			return err
		}
	}
	for _, i := range it.lease.Inputs {
		if int(i) >= len(s.own) {
			return fmt.Errorf("the lease names input %d of %d inputs of tasks' own", i, len(s.own))
		}
		if err := s.fetchInput(it.ctx, s.own[i]); err != nil {
			return err
		}
	}
	return nil
}

// fetchInput fetches in unless it is here already.
func (s *session) fetchInput(ctx context.Context, in *ownInput) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.ready {
		return nil
	}
	if err := s.fetchFile(ctx, in.ref, in.file.Path, 0o444); err != nil {
		return fmt.Errorf("input %s: %w", in.file.Name, err)
	}
	in.ready = true
	return nil
}

// taskInputs are the inputs lease l's task sees: the job's shared ones,
// then those of its own that the lease names (fetchOwn checked them).
func (s *session) taskInputs(l *peerpb.Lease) []sdk.File {
	if len(l.Inputs) == 0 && len(l.Files) == 0 {
		return s.inputs
	}
	files := make([]sdk.File, len(s.inputs), len(s.inputs)+len(l.Inputs)+len(l.Files))
	copy(files, s.inputs)
	for _, i := range l.Inputs {
		if int(i) < len(s.own) {
			files = append(files, s.own[i].file)
		}
	}
	for _, ref := range l.Files {
		files = append(files, sdk.File{Name: ref.Name, Path: s.inputPath(ref.Name)})
	}
	return files
}

// leaseFiles are the inputs that leases carried (Lease.files), by name:
// each is fetched once per session, by the first lease that carries it.
type leaseFiles struct {
	mu     sync.Mutex
	byName map[string]*ownInput
}

// get is the input ref names, made on first sight. A name the hello or
// an earlier lease gave other content is refused: the lease is lost.
func (lf *leaseFiles) get(s *session, ref *peerpb.FileRef) (*ownInput, error) {
	if ref == nil || !nameRe.MatchString(ref.Name) || !filepath.IsLocal(ref.Name) || len(ref.FileId) != blocks.IDSize || len(ref.Digest) != 32 {
		return nil, errors.New("malformed input reference in a lease")
	}
	lf.mu.Lock()
	defer lf.mu.Unlock()
	if in, ok := lf.byName[ref.Name]; ok {
		if !bytes.Equal(in.ref.FileId, ref.FileId) {
			return nil, fmt.Errorf("input %s: a lease names other content than an earlier one", ref.Name)
		}
		return in, nil
	}
	if lf.byName == nil {
		lf.byName = map[string]*ownInput{}
	}
	in := &ownInput{ref: ref, file: sdk.File{Name: ref.Name, Path: s.inputPath(ref.Name)}}
	lf.byName[ref.Name] = in
	return in, nil
}

// inputPath is where the session keeps the input name.
func (s *session) inputPath(name string) string {
	return filepath.Join(s.job.dir, "inputs", filepath.FromSlash(name))
}
