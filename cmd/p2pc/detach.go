package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/pluginbuild"
	"github.com/p2pc/p2pc/internal/swarmjobs"
	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
	"github.com/p2pc/p2pc/spec"
)

// detach hands the job js to the swarm (p2pc run --detach): a member
// owns it and runs its coordinator; this process exits once the job's
// bundle (spec, plugin, inputs) is on the owner and on at least one more
// member (two more when the swarm has them).
func (c *RunCmd) detach(g *Globals, js *spec.Job) error {
	switch {
	case c.Out != "":
		return withCode(exitBadInput, errors.New("--detach writes no output folder here: fetch it later with 'p2pc fetch JOB --out DIR' (or follow the job with 'p2pc attach JOB')"))
	case c.UI != "":
		return withCode(exitBadInput, errors.New("--detach and --ui: the job's web view is its owner's; follow the job with 'p2pc attach JOB'"))
	}
	if len(js.PluginBuilds) > 0 {
		// The bundle carries one plugin executable, this machine's.
		return withCode(exitBadInput, fmt.Errorf("%s:%d:%d: plugin: --detach does not carry a per-platform plugin map yet: give a Go package folder or one executable, or run without --detach", js.File, js.PluginPos.Line, js.PluginPos.Col))
	}
	ctx := g.Ctx
	plug, err := pluginbuild.Resolve(ctx, js.PluginPath, filepath.Join(g.Data, "plugins"), g.Logger)
	if err != nil {
		return withCode(exitBadInput, fmt.Errorf("%s:%d:%d: plugin %q: %w", js.File, js.PluginPos.Line, js.PluginPos.Col, js.Plugin, err))
	}
	files := []swarmjobs.File{{Rel: swarmjobs.SpecFile, Path: js.File}, {Rel: swarmjobs.PluginFile, Path: plug.Path}}
	var inputs []job.Input
	for _, in := range js.Inputs {
		d, err := digest.File(in.Path)
		if err != nil {
			return withCode(exitBadInput, fmt.Errorf("%s:%d:%d: input %q: %w", js.File, in.Pos.Line, in.Pos.Col, in.Name, err))
		}
		inputs = append(inputs, job.Input{Name: in.Name, Path: in.Path, Digest: d})
		files = append(files, swarmjobs.File{Rel: swarmjobs.InputsDir + "/" + in.Name, Path: in.Path})
	}
	id := job.JobID(js, plug.Digest, inputs).String()

	wait := 2 * time.Second
	actx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
	s, err := SwarmAsk{Join: c.Join, NoMDNS: c.NoMDNS, Wait: wait}.ask(actx, g)
	cancel()
	if err != nil {
		return err
	}
	defer s.close()
	if len(s.members) < 2 {
		names := make([]string, len(s.members))
		for i, m := range s.members {
			names[i] = m.Name
		}
		return withCode(exitBadInput, fmt.Errorf("--detach: the swarm has %d member(s) that can keep a job (%s); a job handed to the swarm lives on at least two: start another 'p2pc join', or run without --detach", len(s.members), strings.Join(names, ", ")))
	}
	s.client.Note = func(msg string) { fmt.Fprintf(os.Stderr, "p2pc: %s\n", msg) }
	rec, err := s.client.Submit(ctx, s.members, &pb.Record{Id: id, Name: js.Name}, files)
	if err != nil {
		if ctx.Err() != nil {
			return withCode(exitInterrupted, errors.New("interrupted before the swarm took the job"))
		}
		return withCode(exitInternal, fmt.Errorf("--detach: %w", err))
	}
	// The first line on stdout is for scripts.
	fmt.Fprintf(os.Stdout, "job %s owner %s\n", rec.Id, rec.Owner)
	fmt.Fprintf(os.Stderr, "job %s (%s) handed to the swarm: owner %s, copies on %s; 'p2pc attach %s' follows it, 'p2pc fetch %s --out DIR' writes its output once it ended\n",
		rec.Id[:12], rec.Name, rec.Owner, strings.Join(rec.Holders, ", "), rec.Id[:12], rec.Id[:12])
	return nil
}
