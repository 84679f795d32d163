package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/p2pc/p2pc/internal/job"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/spec"
)

// ValidateCmd is `p2pc validate`.
type ValidateCmd struct {
	Specs    []string `arg:"" optional:"" help:"Job specs (YAML) to check." type:"path" placeholder:"JOB.yaml"`
	TaskUser string   `name:"task-user" env:"P2PC_TASK_USER" help:"When run as root: the account the plugin is started as (as p2pc run's)." placeholder:"USER"`
}

// Run parses each spec and checks its plugin (built, started, asked what
// it is: as p2pc run does before its first task) and its inputs.
func (c *ValidateCmd) Run(g *Globals) error {
	if len(c.Specs) == 0 {
		return withCode(exitBadInput, errors.New("validate: which job? Give one or more job specs (YAML files) to check, e.g. 'p2pc validate examples/echo.yaml'"))
	}
	taskUser, err := sandbox.TaskUser(c.TaskUser)
	if err != nil {
		return withCode(exitBadInput, fmt.Errorf("--task-user: %w", err))
	}
	var bad int
	for _, path := range c.Specs {
		js, err := spec.ParseFile(path)
		var what string
		if err == nil {
			what, err = c.check(g, js, taskUser)
		}
		if g.Ctx.Err() != nil {
			return withCode(exitInterrupted, errors.New("validate: interrupted"))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			bad++
			continue
		}
		fmt.Printf("%s: ok: job %q, %d tasks, %s\n", path, js.Name, js.TaskCount(), what)
	}
	if bad > 0 {
		return withCode(exitBadInput, nil)
	}
	return nil
}

// check checks the inputs and the plugin of js, or of each of its stages,
// and says which plugins they are.
func (c *ValidateCmd) check(g *Globals, js *spec.Job, taskUser *sandbox.User) (string, error) {
	jobs := []*spec.Job{js}
	if len(js.Stages) > 0 {
		jobs = jobs[:0]
		for _, st := range js.Stages {
			jobs = append(jobs, st.Job)
		}
	}
	var whats []string
	for _, j := range jobs {
		if err := checkInputs(j); err != nil {
			return "", err
		}
		info, err := job.CheckPlugin(g.Ctx, j, job.CheckOptions{CacheDir: filepath.Join(g.Data, "plugins"), TaskUser: taskUser, Logger: g.Logger})
		if err != nil {
			return "", err
		}
		what := fmt.Sprintf("plugin %s (%s %s)", j.Plugin, info.Name, info.Version)
		if len(js.Stages) > 0 {
			what = "stage " + j.Name + ": " + what
		}
		whats = append(whats, what)
	}
	return strings.Join(whats, ", "), nil
}

// checkInputs reports an input that is missing or no regular file, with
// its place in the spec.
func checkInputs(js *spec.Job) error {
	for _, in := range js.Inputs {
		fi, err := os.Stat(in.Path)
		if err != nil {
			return fmt.Errorf("%s:%d:%d: input %q: %w", js.File, in.Pos.Line, in.Pos.Col, in.Name, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s:%d:%d: input %q: %s is not a regular file", js.File, in.Pos.Line, in.Pos.Col, in.Name, in.Path)
		}
	}
	return nil
}
