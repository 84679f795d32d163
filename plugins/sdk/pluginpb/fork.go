package pluginpb

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// A task of a job whose spec has `spawn:` runs in a fork tree (sdk.Spawn,
// sdk.Wait). Its side of the tree travels in plain files and outputs, so
// that it needs nothing of the Task service beyond Run:
//
//   - the host gives each task of such a job an input named
//     ForkStatePrefix<task id>.json: a ForkState as JSON; and the outputs
//     of its children done so far, as inputs named
//     ForkOutPrefix<child id>/<file> (file "data" holds a child's inline
//     data). Input names are unique in a job: each names its task;
//   - a task that waits for children not done yet ends its call with an
//     inline result that is SuspendMagic followed by a Suspension as JSON.
//     The host runs the children as tasks of the job, and then the task
//     again, from the start, with their outputs.

// ForkDir is the folder of a fork task's inputs from its tree.
const ForkDir = "spawn"

// ForkStatePrefix starts the name of the input that holds a fork task's
// ForkState, and ForkOutPrefix those of its children's outputs.
const (
	ForkStatePrefix = ForkDir + "/state/"
	ForkOutPrefix   = ForkDir + "/out/"
)

// SuspendMagic starts the inline result of a suspended task.
const SuspendMagic = "\x00p2pc-suspend/1\n"

// ForkState is what the host tells a task of a fork tree.
type ForkState struct {
	// Task is the task's ID and Depth its depth: 0 for a task of the
	// spec, its parent's + 1 for a child.
	Task  string `json:"task"`
	Depth int    `json:"depth"`
	// Children are the children the task spawned in its earlier calls,
	// in spawn order, every one of them done: their outputs are the
	// inputs ForkDir/<n>/<file>.
	Children []ForkChild `json:"children,omitempty"`
	// Checkpoint is the last state the task saved (Host.Checkpoint)
	// before it was suspended; HasCheckpoint says there is one.
	Checkpoint    []byte `json:"checkpoint,omitempty"`
	HasCheckpoint bool   `json:"has_checkpoint,omitempty"`
}

// ForkChild is a child a task spawned: its ID and the params it was
// spawned with, as the task gave them.
type ForkChild struct {
	ID     string          `json:"id"`
	Params json.RawMessage `json:"params"`
}

// Suspension is what a suspended task hands the host: the params of the
// children it spawned in this call beyond the ForkState's, in spawn
// order, and its last checkpoint.
type Suspension struct {
	Children      []json.RawMessage `json:"children"`
	Checkpoint    []byte            `json:"checkpoint,omitempty"`
	HasCheckpoint bool              `json:"has_checkpoint,omitempty"`
}

// EncodeSuspension is s as a suspended task's inline result.
func EncodeSuspension(s *Suspension) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode suspension: %w", err)
	}
	return append([]byte(SuspendMagic), b...), nil
}

// DecodeSuspension reads a task's inline result: ok is false when it is
// not a suspension (the task's own result).
func DecodeSuspension(data []byte) (s *Suspension, ok bool, err error) {
	rest, ok := bytes.CutPrefix(data, []byte(SuspendMagic))
	if !ok {
		return nil, false, nil
	}
	s = &Suspension{}
	if err := json.Unmarshal(rest, s); err != nil {
		return nil, true, fmt.Errorf("decode suspension: %w", err)
	}
	return s, true, nil
}
