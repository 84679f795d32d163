package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/p2pc/p2pc/internal/dirlock"
	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/internal/swarmjobs"
	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
	"github.com/p2pc/p2pc/spec"
)

// A plain `p2pc run` with members present owns its job as a member owns
// one handed to the swarm (docs/protocol.md, swarm jobs: a plain run):
// its journal is copied to holders as it runs, so that if this process
// dies they finish the job; run again, the same command finds the job in
// the swarm and attaches to it, or fetches its output, instead of
// starting over.

// selfRun is the replication of a plain run's job.
type selfRun struct {
	o       *swarmjobs.SelfOwned
	keyFile string // the bundle's note of the plugin's source key
}

// replicates says whether the plain run of js replicates its job: it has
// a swarm, it was not told not to, and the job is one a member can take
// over (one plugin executable, no stages, no spawned tasks).
func (c *RunCmd) replicates(sw *submitterSwarm, js *spec.Job) bool {
	return !c.NoReplicate && sw.remote != nil && sw.conns != nil && len(js.PluginBuilds) == 0 && len(js.Stages) == 0 && js.Spawn == nil
}

// holdMembers are the members that may hold the job: serving jobs, not
// this run's node nor another run's.
func holdMembers(sw *submitterSwarm) []swarmjobs.Member {
	var out []swarmjobs.Member
	for _, m := range jobMembers(sw.members()) {
		if m.ID != sw.self.ID && m.Name != sw.self.Name && !swarmjobs.IsRunNode(m.Name) {
			out = append(out, m)
		}
	}
	return out
}

// membersWait bounds how long a run that resumes an output folder waits
// for the membership to list members that may hold its job, before it
// asks them whether the swarm has the job.
const membersWait = 5 * time.Second

// earlierInSwarm asks the swarm for the job of p when its output folder
// holds an earlier, unfinished run of it (Previous): that run may have
// died and the swarm taken the job over. A fresh output folder asks
// nothing (and waits for nothing).
func (c *RunCmd) earlierInSwarm(ctx context.Context, sw *submitterSwarm, p *job.Prepared) *swarmjobs.Found {
	if p.Previous == nil {
		return nil
	}
	deadline := time.Now().Add(membersWait)
	for len(holdMembers(sw)) < 2 && time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	return inSwarm(ctx, sw, p.ID.String())
}

// inSwarm asks the members that may hold job id for it; nil when none
// has it.
func inSwarm(ctx context.Context, sw *submitterSwarm, id string) *swarmjobs.Found {
	ms := holdMembers(sw)
	if len(ms) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	found, _ := (&swarmjobs.Client{Dial: dialPool(sw.conns)}).List(ctx, ms)
	for _, f := range found {
		if f.Record.Id == id {
			return f
		}
	}
	return nil
}

// fromSwarm says what a run does with its job found in the swarm as f:
// attach (it runs), fetch (it ended complete, its output is held), or
// run it here (nil f, or it ended otherwise) at epoch.
func fromSwarm(f *swarmjobs.Found) (attach, fetch bool, epoch uint64) {
	switch {
	case f == nil:
		return false, false, 1
	case !swarmjobs.Ended(f.Record.State):
		return true, false, 0
	case f.Record.State == swarmjobs.StateComplete && len(f.Results) > 0:
		return false, true, 0
	}
	return false, false, f.Record.Epoch + 1
}

// newSelfRun prepares the replication of prepared job p at epoch, from
// after the job has run for after.
func newSelfRun(g *Globals, sw *submitterSwarm, p *job.Prepared, epoch uint64, after time.Duration) (*selfRun, error) {
	files := []swarmjobs.File{{Rel: swarmjobs.SpecFile, Path: p.Spec.File}, {Rel: swarmjobs.PluginFile, Path: p.Plugin.Path}}
	for _, in := range p.Inputs {
		files = append(files, swarmjobs.File{Rel: swarmjobs.InputsDir + "/" + in.Name, Path: in.Path})
	}
	s := &selfRun{}
	if p.Plugin.SourceKey != "" {
		f, err := os.CreateTemp("", "p2pc-plugin-key-")
		if err != nil {
			return nil, withCode(exitLocalDisk, fmt.Errorf("replicate the job: %w", err))
		}
		_, err = f.WriteString(p.Plugin.SourceKey + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
			return nil, withCode(exitLocalDisk, fmt.Errorf("replicate the job: %w", err))
		}
		s.keyFile = f.Name()
		files = append(files, swarmjobs.File{Rel: swarmjobs.PluginKeyFile, Path: f.Name()})
	}
	s.o = swarmjobs.NewSelfOwned(swarmjobs.SelfOwnedConfig{
		Self:    sw.self,
		Members: func() []swarmjobs.Member { return holdMembers(sw) },
		Dial:    dialPool(sw.conns),
		After:   after,
		Logger:  g.Logger,
	}, &pb.Record{Id: p.ID.String(), Name: p.Spec.Name, Epoch: epoch}, files, p.OutDir)
	return s, nil
}

// options sets the run's options that replicate its job.
func (s *selfRun) options(o *job.RunOptions) {
	o.Epoch = s.o.Record().Epoch
	o.Replicate = func(ctx context.Context, snap string) error {
		err := s.o.Replicate(ctx, snap)
		if errors.Is(err, swarmjobs.ErrNoHolders) {
			return job.ErrNoSuccessors
		}
		return err
	}
	o.Events = progressTee{o.Events, s.o}
	// The node stays in the membership until the holders heard of the
	// job's end (end): leaving first would look like the death they
	// take the job over for. A job no member was asked to hold (it
	// ended before ReplicateAfter) leaves as a run without replication.
	leave := o.Ending
	o.Ending = func() {
		if s.o.Close() && leave != nil {
			leave()
		}
	}
}

// end tells the holders that the run ended with err (unless a later
// owner fenced it off: the job is theirs): they forget the job.
func (s *selfRun) end(runErr error) {
	if errors.Is(runErr, job.ErrFenced) {
		return
	}
	state := swarmjobs.StateComplete
	if runErr != nil {
		state = swarmjobs.StateFailed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.o.End(ctx, state)
}

func (s *selfRun) close() {
	if s.keyFile != "" {
		os.Remove(s.keyFile)
	}
}

// progressTee passes a job's counts to the replication too (the holders'
// record of the job, as `p2pc jobs` lists it).
type progressTee struct {
	job.Events
	o *swarmjobs.SelfOwned
}

func (t progressTee) Started(total, done int) {
	t.o.Progress(done, 0, 0, total)
	if t.Events != nil {
		t.Events.Started(total, done)
	}
}

func (t progressTee) Counts(c job.Counts) {
	t.o.Progress(c.Done, c.Failed, c.Running, c.Total)
	if t.Events != nil {
		t.Events.Counts(c)
	}
}

// ownerWaitRerun bounds how long a run that found its job running in the
// swarm waits for an owner that answers (the one that takes over from a
// dead one) before it gives up.
const ownerWaitRerun = 2 * time.Minute

// rejoin follows job p, found in the swarm as f, to its end (attach) or
// fetches its output (fetch), and writes the output folder p.OutDir.
func (c *RunCmd) rejoin(ctx context.Context, sw *submitterSwarm, p *job.Prepared, f *swarmjobs.Found, attach bool) error {
	r := f.Record
	client := &swarmjobs.Client{Dial: dialPool(sw.conns)}
	start := time.Now()
	if attach {
		fmt.Fprintf(os.Stderr, "job %s (%s) is running in the swarm (owner %s, epoch %d, %d of %d tasks done): attaching to it instead of starting over\n",
			r.Id[:12], r.Name, r.Owner, r.Epoch, r.Done, r.Total)
		id := r.Id
		var err error
		r, err = followProgress(ctx, client, func() []swarmjobs.Member { return holdMembers(sw) }, f, ownerWaitRerun, !c.NoProgress)
		if err != nil {
			if ctx.Err() != nil {
				return withCode(exitInterrupted, errors.New("interrupted; the job goes on in the swarm (the same command again, or 'p2pc attach', follows it)"))
			}
			return withCode(exitInternal, fmt.Errorf("%w: run the same command with --no-replicate to resume it here from the output folder", err))
		}
		// The owner copies the output folder to the holders once the job
		// ended: ask again who holds it.
		if nf := inSwarm(ctx, sw, id); nf != nil {
			f = nf
		}
		f.Record = r
	} else {
		fmt.Fprintf(os.Stderr, "job %s (%s) finished in the swarm (%s, owner %s, epoch %d): fetching its output folder instead of running it again\n",
			r.Id[:12], r.Name, r.State, r.Owner, r.Epoch)
	}
	from, err := replaceOut(p.OutDir, func(tmp string) (string, error) { return client.Fetch(ctx, f, tmp) })
	if err != nil {
		return withCode(exitInternal, fmt.Errorf("write the output folder of job %s: %w", r.Id[:12], err))
	}
	if r.Submitter == sw.self.ID {
		if _, err := client.Fetched(ctx, f); err != nil {
			fmt.Fprintf(os.Stderr, "p2pc: job %s: not every member holding its output heard that you have it (they keep their copies until --retain): %v\n", r.Id[:12], err)
		}
	}
	fmt.Fprintf(os.Stderr, "job %s (%s, %s): output folder written to %s (from %s)\n", r.Id[:12], r.Name, r.State, p.OutDir, from)
	if err := c.summarize(ctx, p.OutDir, time.Since(start)); err != nil {
		return err
	}
	return endedCode(r)
}

// summarize prints the summary of the job in the output folder out (and
// its report with --json), as a run that ran it does.
func (c *RunCmd) summarize(ctx context.Context, out string, took time.Duration) error {
	rep, err := jobdb.ReadReport(ctx, out)
	if err != nil {
		return withCode(exitInternal, fmt.Errorf("read the job's report: %w", err))
	}
	if c.JSON {
		head := *rep
		head.Tasks = nil
		if err := report.EncodeEach(os.Stdout, &head, dbTasks(ctx, out)); err != nil {
			return withCode(exitInternal, fmt.Errorf("print report: %w", err))
		}
	}
	sums, err := summaryTasks(ctx, out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "p2pc: read the tasks: %v\n", err)
	}
	printSummary(os.Stderr, rep, sums, out, took)
	return nil
}

// replaceOut writes a copy of an output folder (fetch writes it into the
// empty folder it is given) in place of what the locked output folder
// out holds: through a folder beside out, whose entries then replace
// out's (its lock stays). It returns what fetch returned.
func replaceOut(out string, fetch func(tmp string) (string, error)) (string, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(out), "."+filepath.Base(out)+".fetch-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	from, err := fetch(tmp)
	if err != nil {
		return "", err
	}
	old, err := os.ReadDir(out)
	if err != nil {
		return "", err
	}
	for _, e := range old {
		if e.Name() != dirlock.FileName {
			if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
				return "", err
			}
		}
	}
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return "", err
	}
	// The job database last: what it names is in place before it.
	var db os.DirEntry
	for _, e := range ents {
		switch e.Name() {
		case dirlock.FileName:
			continue
		case jobdb.FileName:
			db = e
			continue
		}
		if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(out, e.Name())); err != nil {
			return "", err
		}
	}
	if db != nil {
		if err := os.Rename(filepath.Join(tmp, db.Name()), filepath.Join(out, db.Name())); err != nil {
			return "", err
		}
	}
	return from, nil
}
