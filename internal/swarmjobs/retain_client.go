package swarmjobs

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

func (c *Client) note(msg string) {
	if c.Note != nil {
		c.Note(msg)
	}
}

// Fetched tells the members holding ended job f's output folder that its
// submitter (this node) fetched it, so that they may drop all copies but
// the keeper's; it returns how many took note. ErrDenied: this node is
// not the job's submitter.
func (c *Client) Fetched(ctx context.Context, f *Found) (int, error) {
	n := 0
	var errs []error
	for _, m := range f.Results {
		jc, err := c.jobs(m.Addr)
		if err == nil {
			_, err = jc.Fetched(ctx, &pb.JobRef{Id: f.Record.Id})
		}
		if status.Code(err) == codes.PermissionDenied {
			return n, fmt.Errorf("%w: %s", ErrDenied, status.Convert(err).Message())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s: %s", m.Name, status.Convert(err).Message()))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Disks asks each member what it keeps of the swarm's jobs against its
// cap (p2pc join --disk), by member name; members that do not answer are
// left out.
func (c *Client) Disks(ctx context.Context, members []Member) map[string]DiskUse {
	out := map[string]DiskUse{}
	for _, m := range members {
		jc, err := c.jobs(m.Addr)
		if err != nil {
			continue
		}
		rep, err := jc.List(ctx, &pb.ListRequest{})
		if err != nil {
			continue
		}
		out[m.Name] = DiskUse{Cap: rep.DiskCap, Used: rep.DiskUsed}
	}
	return out
}
