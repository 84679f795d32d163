package swarmjobs

import (
	"path/filepath"
	"slices"
	"time"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// New holders for an owned job whose holders are all gone.
//
// Its journal then reaches nobody: its coordinator leases nothing (package
// job's lease gate: an owner cut off from its successors must stop, the
// other side of a partition takes over) and nobody could take the job
// over. When the membership still has other live members, they are not
// the other side of a partition: the bundle goes to the next of them in
// rank order, which become the holders, and the journal follows with the
// next snapshot, so the job runs on and has successors again. Alone on
// its side, the owner finds nobody and stays stopped.

// replaceEvery spaces the attempts to place new holders.
const replaceEvery = 5 * time.Second

// replaceHolders gives the bundle of owned job e, whose holders are all
// declared dead, to other live members (in the background, at most once
// every replaceEvery), and makes those that took it its holders.
func (s *Service) replaceHolders(e *entry) {
	s.mu.Lock()
	if !e.owned || e.replacing || time.Since(e.replaced) < replaceEvery {
		s.mu.Unlock()
		return
	}
	e.replacing, e.replaced = true, time.Now()
	s.mu.Unlock()
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			e.replacing = false
			s.mu.Unlock()
		}()
		_, r, ok := s.get(e.rec.Id)
		if !ok || Ended(r.State) {
			return
		}
		held, _ := s.replicate(s.life, r, KindJob, filepath.Join(e.dir, "bundle"), nil, r.Submitter)
		if len(held) == 0 {
			return
		}
		s.log.Warn("every holder of an owned job is gone: the job has new holders", "job", r.Id[:12], "gone", r.Holders, "holders", held)
		s.update(e, func(r *pb.Record) { r.Holders = slices.Clone(held) })
	})
}
