package job

import (
	"runtime"

	"github.com/p2pc/p2pc/spec"
)

// localOffer is what this machine's own slots offer a task: its
// platform and CPUs, no GPU (GPU slots are a peer's: p2pc join --gpus).
func localOffer() spec.Resources {
	return spec.Resources{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: float64(runtime.NumCPU())}
}

// localMisfit says why this machine cannot run the job's tasks on its
// own slots ("" if it can). A peer admits a job through the same check
// (spec.Resources.Admit) with its own offer: internal/node.
func localMisfit(r spec.Resources) string {
	if ok, why := localOffer().Admit(r); !ok {
		return why.Reason("this machine", "")
	}
	return ""
}
