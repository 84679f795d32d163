package sdk

import "strings"

// NeedsDir is the folder of a task's inputs that are the outputs of the
// upstream tasks it needs, in a job with stages: an input named
// needs/<stage>/<task id>/<file>.
const NeedsDir = "needs"

// Upstream is an output file of an upstream task.
type Upstream struct {
	Stage string // the upstream stage
	Task  string // the upstream task's ID
	Name  string // the file's name in that task's output
	File  File
}

// Needs returns the outputs of upstream tasks the task sees, from stage
// (from every stage when stage is ""), in the order of Inputs: by stage
// as the spec's needs list them, then by task, then by file.
func (r *Request) Needs(stage string) []Upstream {
	var out []Upstream
	for _, f := range r.Inputs {
		rest, ok := strings.CutPrefix(f.Name, NeedsDir+"/")
		if !ok {
			continue
		}
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) != 3 || stage != "" && parts[0] != stage {
			continue
		}
		out = append(out, Upstream{Stage: parts[0], Task: parts[1], Name: parts[2], File: f})
	}
	return out
}
