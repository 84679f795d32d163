package swarmjobs

import (
	"fmt"
	"slices"
	"strings"
)

// unplace forgets the holders of a plain run's job once none of them
// (gone) is a live member: the run's journal counts as durable on its own
// disk again (ErrNoHolders: package job's lease gate does not stop a
// run without successors, so a user's run goes on when the volunteers
// leave) and the next Replicate places the job anew on the members
// there are. On the cut-off side of a partition this lets the run go on
// beside the side that took the job over; it is fenced off after the
// heal.
func (o *SelfOwned) unplace(gone []string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if slices.Equal(o.rec.Holders, gone) {
		o.rec.Holders = nil
		o.sent = map[string]map[string]bool{}
	}
	o.log.Warn("none of the job's holders is a live member: its journal is kept here only until it is placed again", "job", shortJob(o.rec.Id), "holders", strings.Join(gone, ", "))
	return fmt.Errorf("job %s: none of its holders (%s) is a live member: %w", shortJob(o.rec.Id), strings.Join(gone, ", "), ErrNoHolders)
}
