package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/p2pc/p2pc/spec"
)

// ValidateCmd is `p2pc validate`.
type ValidateCmd struct {
	Specs []string `arg:"" optional:"" help:"Job specs (YAML) to check." type:"path" placeholder:"JOB.yaml"`
}

// Run parses each spec and checks that its plugin and inputs exist.
func (c *ValidateCmd) Run(g *Globals) error {
	if len(c.Specs) == 0 {
		return withCode(exitBadInput, errors.New("validate: which job? Give one or more job specs (YAML files) to check, e.g. 'p2pc validate examples/echo.yaml'"))
	}
	var bad int
	for _, path := range c.Specs {
		js, err := spec.ParseFile(path)
		if err == nil {
			err = checkFiles(js)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			bad++
			continue
		}
		fmt.Printf("%s: ok: job %q, %d tasks, plugin %s\n", path, js.Name, js.Tasks.Len(), js.Plugin)
	}
	if bad > 0 {
		return withCode(exitBadInput, nil)
	}
	return nil
}

// checkFiles reports a missing plugin or input with its place in the spec.
func checkFiles(js *spec.Job) error {
	if _, err := os.Stat(js.PluginPath); err != nil {
		return fmt.Errorf("%s:%s: plugin %q: %w", js.File, js.PluginPos, js.Plugin, err)
	}
	for _, in := range js.Inputs {
		if _, err := os.Stat(in.Path); err != nil {
			return fmt.Errorf("%s:%d:%d: input %q: %w", js.File, in.Pos.Line, in.Pos.Col, in.Name, err)
		}
	}
	return nil
}
