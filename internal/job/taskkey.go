package job

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/spec"
)

// A task's key names what its output is a function of: the plugin (its
// digest: the executable's bytes, reproducibly built), the task's ID and
// effective params (the job's merged with the task's, canonical JSON, as
// the plugin receives them), every input the task sees (name and
// digest), and the sandbox's network switch. It leaves out what changes
// how a task is run but not its correct output: timeout, retries,
// verify, resources, batch, the job's name and the other tasks. An
// edited job reuses a task an earlier run finished when its key is
// unchanged and its output still matches its digest.
//
// keyFormat names the encoding below; a new encoding takes a new name,
// and keys of the old one then match nothing (the tasks run again).
const keyFormat = "p2pc-task-key-v1"

// KeyBase is the part of a task's key that every task of a job shares:
// hashed once per job.
type KeyBase digest.ID

// NewKeyBase hashes what the tasks of a job share in their keys.
func NewKeyBase(plugin digest.ID, inputs []Input, sandbox spec.Sandbox) KeyBase {
	h := sha256.New()
	h.Write([]byte(keyFormat + "\n"))
	h.Write(plugin[:])
	writeField(h.Write, []byte{boolByte(sandbox.Network)})
	for _, in := range inputs {
		writeField(h.Write, []byte(in.Name))
		h.Write(in.Digest[:])
	}
	var b KeyBase
	h.Sum(b[:0])
	return b
}

// Task is the key of the task with id and params (canonical JSON).
// Inputs of its own (upstream outputs, for stages) would be hashed after
// them, as NewKeyBase hashes the job's.
func (b KeyBase) Task(id string, params []byte) [32]byte {
	var room [256]byte // most tasks' keys are hashed without an allocation
	buf := append(room[:0], b[:]...)
	buf = binary.AppendUvarint(buf, uint64(len(id)))
	buf = append(buf, id...)
	buf = binary.AppendUvarint(buf, uint64(len(params)))
	buf = append(buf, params...)
	return sha256.Sum256(buf)
}

// writeField writes a field prefixed by its length: no two lists of
// fields give the same bytes.
func writeField(write func([]byte) (int, error), f []byte) {
	write(binary.AppendUvarint(nil, uint64(len(f))))
	write(f)
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// TaskKey is task i's key in job p.
func (p *Prepared) TaskKey(i int) [32]byte {
	return p.taskKey(i, p.Spec.Tasks.ID(i), p.Spec.TaskParamsJSON(i))
}

// taskKey is task i's key, its ID and params given.
func (p *Prepared) taskKey(i int, id string, params []byte) [32]byte {
	k := p.keyBase.Task(id, params)
	if p.taskInputs != nil {
		k = withInputs(k, p.taskInputs(i))
	}
	return k
}
