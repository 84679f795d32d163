package node

import (
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// taskInputs are the inputs lease l's task sees: the job's shared ones,
// then those of its own that the lease names (Hello.own_inputs,
// Lease.inputs). An index out of range is left out, and said.
func (s *session) taskInputs(l *peerpb.Lease) []sdk.File {
	if len(l.Inputs) == 0 {
		return s.inputs
	}
	files := make([]sdk.File, len(s.inputs), len(s.inputs)+len(l.Inputs))
	copy(files, s.inputs)
	for _, i := range l.Inputs {
		if int(i) >= len(s.own) {
			s.log.Warn("lease names an input the job has not", "lease", l.LeaseId, "input", i, "own_inputs", len(s.own))
			continue
		}
		files = append(files, s.own[i])
	}
	return files
}
