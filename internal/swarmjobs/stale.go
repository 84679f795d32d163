package swarmjobs

import (
	"os"
	"path/filepath"
)

// dropStaleOutput removes the output folder a member wrote while it owned
// job e, once it stepped down for a later owner: its results were never
// acknowledged under the epoch that lost, and the later owner's journal
// is the job's. Kept, it would be served as the job's output (List's
// results, Fetch) as soon as a record saying the job ended reached this
// member, with tasks missing or from the losing side. A copy of the
// output that the later owner sends once the job ended comes back there.
func (s *Service) dropStaleOutput(e *entry) {
	out := filepath.Join(e.dir, "out")
	if !exists(out) {
		return
	}
	if err := os.RemoveAll(out); err != nil {
		s.log.Warn("the output folder written as a superseded owner could not be removed", "job", e.rec.Id[:12], "err", err)
		return
	}
	s.log.Info("removed the output folder written as a superseded owner", "job", e.rec.Id[:12])
	s.measure(e.rec.Id)
}
