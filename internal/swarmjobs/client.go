package swarmjobs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// Client calls the Jobs protocol of the swarm's members.
type Client struct {
	Dial func(addr string) (grpc.ClientConnInterface, error)
	// Note, if set, is told why a member did not take a job or a copy
	// (one line each) while Submit goes on with the next.
	Note func(msg string)
}

func (c *Client) jobs(addr string) (pb.JobsClient, error) {
	cc, err := c.Dial(addr)
	if err != nil {
		return nil, err
	}
	return pb.NewJobsClient(cc), nil
}

// Errors of the client's commands: an exit code depends on them.
var (
	// ErrNoJob: no job of the swarm matches the given ID or prefix, or
	// several do.
	ErrNoJob = errors.New("no such job")
	// ErrRunning: the job has not ended (fetch).
	ErrRunning = errors.New("job still running")
	// ErrDenied: the caller may not do that (cancel by a non-submitter).
	ErrDenied = errors.New("not allowed")
	// ErrNotRunning: the job cannot be canceled (it ended, or the member
	// asked does not run it).
	ErrNotRunning = errors.New("cannot cancel")
)

// Submit hands a job to the swarm: the members in the job's rank (Rank)
// are asked in turn to own it, until one does. files are the job's
// bundle; rec has its ID and name.
func (c *Client) Submit(ctx context.Context, members []Member, rec *pb.Record, files []File) (*pb.Record, error) {
	var errs []error
	for _, m := range Rank(rec.Id, members) {
		placed, err := c.submitTo(ctx, m, rec, files)
		if err == nil {
			for _, msg := range placed.Refused {
				c.note(msg)
			}
			return placed.Record, nil
		}
		errs = append(errs, fmt.Errorf("%s: %s", m.Name, status.Convert(err).Message()))
		c.note(fmt.Sprintf("member %s did not take job %s: %s", m.Name, rec.Id[:12], status.Convert(err).Message()))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("no member took the job: %w", errors.Join(errs...))
}

func (c *Client) submitTo(ctx context.Context, m Member, rec *pb.Record, files []File) (*pb.Placed, error) {
	jc, err := c.jobs(m.Addr)
	if err != nil {
		return nil, err
	}
	st, err := jc.Submit(ctx)
	if err != nil {
		return nil, err
	}
	// An error sending (the owner refused early) shows in CloseAndRecv.
	_ = sendBundle(st.Send, &pb.Header{Kind: KindJob, Record: rec, Size: filesSize(files)}, files)
	return st.CloseAndRecv()
}

// Found is a job as the swarm's members know it: the newest record, and
// the members that hold its output folder.
type Found struct {
	Record *pb.Record
	// Results are the members holding the output folder.
	Results []Member
	// Owner is the member that owns it, if it answered.
	Owner *Member
}

// List asks every member for its jobs and merges the answers, by job ID,
// newest record first (Newer); it returns the jobs sorted by creation,
// and the errors of members that did not answer.
func (c *Client) List(ctx context.Context, members []Member) ([]*Found, []error) {
	byID := map[string]*Found{}
	var errs []error
	for _, m := range members {
		jc, err := c.jobs(m.Addr)
		var rep *pb.ListReply
		if err == nil {
			rep, err = jc.List(ctx, &pb.ListRequest{})
		}
		if status.Code(err) == codes.Unimplemented {
			continue // a `p2pc run`'s node: it keeps no swarm jobs
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("member %s: %s", m.Name, status.Convert(err).Message()))
			continue
		}
		for _, r := range rep.Jobs {
			f := byID[r.Id]
			if f == nil {
				f = &Found{Record: r}
				byID[r.Id] = f
			}
			if r.OwnerId == m.ID {
				mm := m
				f.Owner = &mm
				if !Newer(f.Record, r) {
					f.Record = r
				}
			} else if Newer(r, f.Record) {
				f.Record = r
			}
			if r.Results {
				f.Results = append(f.Results, m)
			}
		}
	}
	out := make([]*Found, 0, len(byID))
	for _, f := range byID {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *Found) int {
		if a.Record.CreatedMs != b.Record.CreatedMs {
			return int(a.Record.CreatedMs - b.Record.CreatedMs)
		}
		return strings.Compare(a.Record.Id, b.Record.Id)
	})
	return out, errs
}

// Pick returns the job whose ID is id or starts with it: ErrNoJob when
// none or several do.
func Pick(jobs []*Found, id string) (*Found, error) {
	id = strings.ToLower(id)
	if id == "" {
		return nil, fmt.Errorf("%w: give a job ID or a prefix of one ('p2pc jobs' lists them)", ErrNoJob)
	}
	var hits []*Found
	for _, f := range jobs {
		if f.Record.Id == id {
			return f, nil
		}
		if strings.HasPrefix(f.Record.Id, id) {
			hits = append(hits, f)
		}
	}
	switch len(hits) {
	case 0:
		return nil, fmt.Errorf("%w: no job of the swarm has an ID starting with %q ('p2pc jobs' lists them)", ErrNoJob, id)
	case 1:
		return hits[0], nil
	}
	names := make([]string, len(hits))
	for i, f := range hits {
		names[i] = f.Record.Id[:12] + " (" + f.Record.Name + ")"
	}
	return nil, fmt.Errorf("%w: %q is ambiguous: it starts %d job IDs: %s; give more of the ID", ErrNoJob, id, len(hits), strings.Join(names, ", "))
}

// owner is a client of the owner of job f.
func (c *Client) owner(f *Found) (pb.JobsClient, error) {
	if f.Owner == nil {
		return nil, fmt.Errorf("job %s: its owner %s did not answer", f.Record.Id[:12], f.Record.Owner)
	}
	return c.jobs(f.Owner.Addr)
}

// Watch calls f with the owner's record of job f as it changes, until the
// job ended (it returns that record) or ctx ends.
func (c *Client) Watch(ctx context.Context, f *Found, each func(*pb.Record)) (*pb.Record, error) {
	jc, err := c.owner(f)
	if err != nil {
		return nil, err
	}
	st, err := jc.Watch(ctx, &pb.JobRef{Id: f.Record.Id})
	if err != nil {
		return nil, err
	}
	for {
		r, err := st.Recv()
		if err != nil {
			return nil, fmt.Errorf("watch job %s on %s: %s", f.Record.Id[:12], f.Owner.Name, status.Convert(err).Message())
		}
		each(r)
		if Ended(r.State) {
			return r, nil
		}
	}
}

// Fetch writes the output folder of ended job f into out, from the first
// member holding it that sends it whole: through a temporary folder
// beside out, renamed to out. out must not exist, or be an empty folder.
func (c *Client) Fetch(ctx context.Context, f *Found, out string) (from string, err error) {
	if !Ended(f.Record.State) {
		return "", fmt.Errorf("%w: job %s (%s) is still running: %d of %d tasks done; 'p2pc attach %s' waits for its end", ErrRunning, f.Record.Id[:12], f.Record.Name, f.Record.Done, f.Record.Total, f.Record.Id[:12])
	}
	if len(f.Results) == 0 {
		return "", fmt.Errorf("job %s (%s, %s): no member that answered holds its output folder", f.Record.Id[:12], f.Record.Name, f.Record.State)
	}
	if fi, err := os.Lstat(out); err == nil {
		if !fi.IsDir() {
			return "", fmt.Errorf("fetch into %s: it exists and is not a folder", out)
		}
		if ents, err := os.ReadDir(out); err != nil || len(ents) > 0 {
			return "", fmt.Errorf("fetch into %s: the folder exists and is not empty", out)
		}
	}
	var errs []error
	for _, m := range f.Results {
		if err := c.fetchFrom(ctx, m, f.Record.Id, out); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
			continue
		}
		return m.Name, nil
	}
	return "", fmt.Errorf("fetch job %s: %w", f.Record.Id[:12], errors.Join(errs...))
}

func (c *Client) fetchFrom(ctx context.Context, m Member, id, out string) error {
	jc, err := c.jobs(m.Addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := jc.Fetch(ctx, &pb.JobRef{Id: id})
	if err != nil {
		return err
	}
	if _, err := recvHeader(st.Recv); err != nil {
		return errors.New(status.Convert(err).Message())
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := intoDir(st.Recv, abs); err != nil {
		return errors.New(status.Convert(err).Message())
	}
	return nil
}

// Cancel asks the owner of job f to end it.
func (c *Client) Cancel(ctx context.Context, f *Found) (*pb.Record, error) {
	jc, err := c.owner(f)
	if err != nil {
		return nil, err
	}
	r, err := jc.Cancel(ctx, &pb.JobRef{Id: f.Record.Id})
	if err != nil {
		st := status.Convert(err)
		switch st.Code() {
		case codes.PermissionDenied:
			return nil, fmt.Errorf("%w: %s", ErrDenied, st.Message())
		case codes.FailedPrecondition:
			return nil, fmt.Errorf("%w: %s", ErrNotRunning, st.Message())
		}
		return nil, errors.New(st.Message())
	}
	return r, nil
}
