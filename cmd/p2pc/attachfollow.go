package main

import (
	"fmt"

	"github.com/p2pc/p2pc/internal/swarmjobs"
)

// liveMembers are the members serving jobs as the command's membership
// knows them now (attach follows a job to a new owner through it).
func (s *asked) liveMembers() []swarmjobs.Member { return jobMembers(s.obs.members()) }

// note prints a line about the job (its owner changed) beside the bar.
func (p *progress) note(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "p2pc: %s\n", msg)
}
