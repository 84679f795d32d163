package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/p2pc/p2pc/internal/swarmjobs"
	"github.com/p2pc/p2pc/spec"
)

// jobsKeep is how a member keeps the copies of the swarm's jobs.
type jobsKeep struct {
	// Disk caps what it keeps (p2pc join --disk; 0: no cap).
	Disk int64
	// LostAfter: a holder not live this long lost its copy.
	LostAfter time.Duration
}

// markFetched tells the members holding job f's output that its
// submitter fetched it, when this node is the submitter: all copies but
// one may go then.
func markFetched(ctx context.Context, s *asked, f *swarmjobs.Found) {
	if s.obs.creds.ID().String() != f.Record.Submitter {
		return
	}
	n, err := s.client.Fetched(ctx, f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "p2pc: job %s: not every member holding its output heard that you fetched it (they keep their copies until --retain): %v\n", f.Record.Id[:12], err)
	}
	if n > 0 {
		fmt.Fprintf(os.Stderr, "job %s: you have its output: the swarm keeps one copy (on the first live holder in the job's rank) until --retain passes\n", f.Record.Id[:12])
	}
}

// printDisks prints what each member keeps of the swarm's jobs against
// its cap (p2pc jobs, after the jobs).
func printDisks(ctx context.Context, s *asked) error {
	disks := s.client.Disks(ctx, s.members)
	if len(disks) == 0 {
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nMEMBER\tKEEPS\tDISK CAP")
	for _, m := range s.members {
		d, ok := disks[m.Name]
		if !ok {
			continue
		}
		limit := "none"
		if d.Cap > 0 {
			limit = spec.FormatSize(d.Cap)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", m.Name, spec.FormatSize(d.Used), limit)
	}
	return w.Flush()
}
