package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"

	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/swarmjobs"
	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
	"github.com/p2pc/p2pc/internal/transfer"
)

// SwarmAsk are the flags of the commands that ask the swarm's members
// (jobs, attach, fetch, cancel): like `p2pc peers`.
type SwarmAsk struct {
	Join   []string      `help:"Members to ask (host or host:port; port 7070 when none is given), besides those found with mDNS." sep:"," placeholder:"ADDR"`
	NoMDNS bool          `name:"no-mdns" env:"P2PC_NO_MDNS" help:"Do not look for members with mDNS."`
	Wait   time.Duration `help:"How long to look for members with mDNS." default:"2s"`
}

// asked is the swarm as a command that asks its members sees it.
type asked struct {
	obs     *observer
	client  *swarmjobs.Client
	members []swarmjobs.Member
}

// ask joins the swarm as an observer and lists its members that serve
// jobs.
func (a SwarmAsk) ask(ctx context.Context, g *Globals) (*asked, error) {
	o, err := observe(ctx, g, a.Join, a.NoMDNS, a.Wait)
	if err != nil {
		return nil, err
	}
	return &asked{obs: o, client: &swarmjobs.Client{Dial: dialPool(o.conns)}, members: jobMembers(o.members())}, nil
}

func (s *asked) close() { s.obs.close() }

// dialPool dials members through the connection pool p (mutual TLS with
// this node's identity).
func dialPool(p *transfer.Pool) func(addr string) (grpc.ClientConnInterface, error) {
	return func(addr string) (grpc.ClientConnInterface, error) { return p.Conn(addr) }
}

// jobs lists the swarm's jobs; it says on stderr which members did not
// answer.
func (s *asked) jobs(ctx context.Context) []*swarmjobs.Found {
	found, errs := s.client.List(ctx, s.members)
	for _, err := range errs {
		fmt.Fprintf(os.Stderr, "p2pc: %v\n", err)
	}
	return found
}

// pick finds job id (or a unique prefix of it) in the swarm.
func (s *asked) pick(ctx context.Context, id string) (*swarmjobs.Found, error) {
	f, err := swarmjobs.Pick(s.jobs(ctx), id)
	if err != nil {
		return nil, withCode(exitNoJob, err)
	}
	return f, nil
}

// askJob asks the swarm for job id (or a unique prefix of it); the caller
// closes s.
func (a SwarmAsk) askJob(g *Globals, id string) (s *asked, f *swarmjobs.Found, err error) {
	if s, err = a.ask(g.Ctx, g); err != nil {
		return nil, nil, err
	}
	if f, err = s.pick(g.Ctx, id); err != nil {
		s.close()
		return nil, nil, err
	}
	return s, f, nil
}

// JobsCmd is `p2pc jobs`: the jobs handed to the swarm.
type JobsCmd struct {
	SwarmAsk
	JSON bool `help:"Print the jobs as a JSON array."`
}

// jobJSON is a job as `p2pc jobs --json` prints it (snake_case keys, as
// in report.json).
type jobJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	State     string    `json:"state"`
	Owner     string    `json:"owner"`
	OwnerID   string    `json:"owner_id"`
	Epoch     uint64    `json:"epoch"`
	Submitter string    `json:"submitter"`
	Done      int64     `json:"done"`
	Failed    int64     `json:"failed"`
	Running   int64     `json:"running"`
	Total     int64     `json:"total"`
	Created   time.Time `json:"created"`
	Ended     time.Time `json:"ended,omitzero"`
	Holders   []string  `json:"holders"`
	// ResultsOn are the members that hold the output folder.
	ResultsOn []string `json:"results_on"`
	// Fetched: the submitter's node fetched the output folder; one copy
	// is kept.
	Fetched bool   `json:"fetched"`
	Error   string `json:"error,omitempty"`
}

func toJobJSON(f *swarmjobs.Found) jobJSON {
	r := f.Record
	j := jobJSON{ID: r.Id, Name: r.Name, State: r.State, Owner: r.Owner, OwnerID: r.OwnerId, Epoch: r.Epoch, Submitter: r.Submitter,
		Done: r.Done, Failed: r.Failed, Running: r.Running, Total: r.Total, Created: time.UnixMilli(r.CreatedMs).UTC(),
		Holders: append([]string{}, r.Holders...), ResultsOn: []string{}, Fetched: r.Fetched, Error: r.Error}
	if r.EndedMs > 0 {
		j.Ended = time.UnixMilli(r.EndedMs).UTC()
	}
	for _, m := range f.Results {
		j.ResultsOn = append(j.ResultsOn, m.Name)
	}
	return j
}

// Run lists the jobs of every member that answers.
func (c *JobsCmd) Run(g *Globals) error {
	ctx, cancel := context.WithTimeout(g.Ctx, c.Wait+30*time.Second)
	defer cancel()
	s, err := c.ask(ctx, g)
	if err != nil {
		return err
	}
	defer s.close()
	found := s.jobs(ctx)
	if c.JSON {
		out := make([]jobJSON, len(found))
		for i, f := range found {
			out[i] = toJobJSON(f)
		}
		return printJSON(out)
	}
	if len(found) == 0 {
		fmt.Fprintln(os.Stderr, "no jobs in the swarm")
		return printDisks(ctx, s)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tSTATE\tDONE\tOWNER\tSUBMITTER\tCREATED")
	for _, f := range found {
		r := f.Record
		fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.Id[:12], r.Name, r.State, r.Done, r.Total, r.Owner, shortID(r.Submitter),
			time.UnixMilli(r.CreatedMs).Local().Format(time.DateTime))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return printDisks(ctx, s)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// AttachCmd is `p2pc attach`: follow a job of the swarm to its end.
type AttachCmd struct {
	Job string `arg:"" help:"Job ID, or a unique prefix of it ('p2pc jobs' lists them)." placeholder:"JOB"`
	SwarmAsk
	Out        string `help:"Where to write the job's output folder when it ends (default: ./NAME, the job's name)." type:"path" placeholder:"DIR"`
	NoProgress bool   `help:"Do not show a progress bar (plain progress lines still go to stderr)."`
}

// Run shows the job's progress until it ends, then fetches its output
// folder.
func (c *AttachCmd) Run(g *Globals) error {
	s, f, err := c.askJob(g, c.Job)
	if err != nil {
		return err
	}
	defer s.close()
	r := f.Record
	if !swarmjobs.Ended(r.State) {
		r, err = followProgress(g.Ctx, s.client, s.liveMembers, f, 0, !c.NoProgress)
		if err != nil {
			if g.Ctx.Err() != nil {
				return withCode(exitInterrupted, errors.New("interrupted; the job goes on in the swarm ('p2pc attach' again follows it)"))
			}
			return withCode(exitInternal, err)
		}
		// The owner copies the output folder to the holders once the job
		// ended: ask again who holds it.
		if f, err = s.pick(g.Ctx, r.Id); err != nil {
			return err
		}
		f.Record = r
	}
	out := c.Out
	if out == "" {
		out = r.Name
	}
	if err := fetchJob(g.Ctx, s, f, out); err != nil {
		return err
	}
	return endedCode(r)
}

// followProgress follows job f to its end, and to each new owner
// (Client.Follow; lost as there), with a progress bar on stderr (bar) or
// progress lines.
func followProgress(ctx context.Context, client *swarmjobs.Client, members func() []swarmjobs.Member, f *swarmjobs.Found, lost time.Duration, bar bool) (*pb.Record, error) {
	prog := newProgress(os.Stderr, f.Record.Name, bar)
	defer prog.Finish()
	started := false
	return client.Follow(ctx, members, f, lost, prog.note, func(r *pb.Record) {
		if !started && r.Total > 0 {
			prog.Started(int(r.Total), 0)
			started = true
		}
		if started {
			prog.Counts(job.Counts{Total: int(r.Total), Done: int(r.Done), Failed: int(r.Failed), Running: int(r.Running),
				Queued: int(max(0, r.Total-r.Done-r.Failed-r.Running))})
		}
	})
}

// endedCode is the exit of a command that saw job r end.
func endedCode(r *pb.Record) error {
	switch r.State {
	case swarmjobs.StateComplete:
		return nil
	case swarmjobs.StateCanceled:
		return withCode(exitTaskFailed, fmt.Errorf("job %s (%s) was canceled", r.Id[:12], r.Name))
	}
	return withCode(exitTaskFailed, fmt.Errorf("job %s (%s) failed: %s", r.Id[:12], r.Name, r.Error))
}

// fetchJob writes the output folder of ended job f into out.
func fetchJob(ctx context.Context, s *asked, f *swarmjobs.Found, out string) error {
	from, err := s.client.Fetch(ctx, f, out)
	switch {
	case errors.Is(err, swarmjobs.ErrRunning):
		return withCode(exitIncomplete, err)
	case err != nil:
		return withCode(exitInternal, err)
	}
	abs, _ := filepath.Abs(out)
	fmt.Fprintf(os.Stderr, "job %s (%s, %s): output folder written to %s (from %s)\n", f.Record.Id[:12], f.Record.Name, f.Record.State, abs, from)
	markFetched(ctx, s, f)
	return nil
}

// FetchCmd is `p2pc fetch`: write the output folder of an ended job.
type FetchCmd struct {
	Job string `arg:"" help:"Job ID, or a unique prefix of it ('p2pc jobs' lists them)." placeholder:"JOB"`
	SwarmAsk
	Out string `required:"" help:"Folder to write (it must not exist, or be empty)." type:"path" placeholder:"DIR"`
}

// Run fetches the job's output folder from a member that holds it.
func (c *FetchCmd) Run(g *Globals) error {
	s, f, err := c.askJob(g, c.Job)
	if err != nil {
		return err
	}
	defer s.close()
	return fetchJob(g.Ctx, s, f, c.Out)
}

// CancelCmd is `p2pc cancel`: end a running job of the swarm.
type CancelCmd struct {
	Job string `arg:"" help:"Job ID, or a unique prefix of it ('p2pc jobs' lists them)." placeholder:"JOB"`
	SwarmAsk
}

// Run asks the job's owner to cancel it: it does for the submitter's node
// identity only.
func (c *CancelCmd) Run(g *Globals) error {
	s, f, err := c.askJob(g, c.Job)
	if err != nil {
		return err
	}
	defer s.close()
	r, err := s.client.Cancel(g.Ctx, f)
	switch {
	case errors.Is(err, swarmjobs.ErrDenied):
		return withCode(exitDenied, err)
	case errors.Is(err, swarmjobs.ErrNotRunning):
		return withCode(exitBadInput, err)
	case err != nil:
		return withCode(exitInternal, fmt.Errorf("cancel job %s: %w", f.Record.Id[:12], err))
	}
	fmt.Fprintf(os.Stderr, "job %s (%s): %s (%d of %d tasks done)\n", r.Id[:12], r.Name, r.State, r.Done, r.Total)
	return nil
}
