package node

import (
	"fmt"
	"sync"
)

// Fencing by epoch (Hello.epoch).
//
// A job handed to the swarm has one owner at a time, named by an epoch
// that grows by one at each takeover. The node remembers the highest
// epoch each job's coordinators announced (and of two owners of one
// epoch, the lower node ID): a Hello of a lower one is refused (an old owner that was cut off, or came back, gets no lease
// and sends no result), and a session of a higher epoch supersedes the
// job's sessions of lower ones (their results are kept for the new
// owner, keep.go). Epoch 0 (a job not handed to the swarm) is never
// fenced. The epochs are those of one run of the job (Hello.run, kept
// across takeovers: the new owner resumes the old one's job.db): another
// run of the same job, later and from another node (its job ID is its
// spec's, plugin's and inputs'), starts at epoch 1 again and is not fenced
// by the one before.

// epochFence is the owner seen per job ID: the highest epoch and, of two
// coordinators of one epoch (both sides of a partition took the job
// over), the lower node ID. The zero value is ready; its mutex is a leaf.
type epochFence struct {
	mu   sync.Mutex
	high map[string]fenceMark
}

type fenceMark struct {
	epoch uint64
	coord string // node ID
}

// admit records the coordinator coord of epoch for run run of job and
// says why it is refused ("" when it is not: it is the run's latest
// owner seen, or epoch is 0).
func (f *epochFence) admit(job, run string, epoch uint64, coord string) string {
	if epoch == 0 {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.high == nil {
		f.high = map[string]fenceMark{}
	}
	key := job + "/" + run
	h, seen := f.high[key]
	switch {
	case seen && h.epoch > epoch:
		return fmt.Sprintf("job %s is owned at epoch %d now; this coordinator's epoch %d is stale", short(job), h.epoch, epoch)
	case seen && h.epoch == epoch && h.coord != coord && h.coord < coord:
		return fmt.Sprintf("job %s has two owners of epoch %d; the one of the lower node ID (%.12s) keeps it", short(job), epoch, h.coord)
	}
	f.high[key] = fenceMark{epoch, coord}
	return ""
}
