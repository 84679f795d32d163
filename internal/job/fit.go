package job

import (
	"fmt"
	"runtime"

	"github.com/p2pc/p2pc/spec"
)

// localMisfit says why this machine cannot run the job's tasks on its
// own slots ("" if it can): the job's resources name another os or arch,
// or more CPUs than it has. (A peer checks the same and its --memory and
// --cpus: internal/node.)
func localMisfit(r spec.Resources) string {
	switch {
	case r.OS != "" && r.OS != runtime.GOOS:
		return fmt.Sprintf("the job's resources.os is %s, this machine is %s", r.OS, runtime.GOOS)
	case r.Arch != "" && r.Arch != runtime.GOARCH:
		return fmt.Sprintf("the job's resources.arch is %s, this machine is %s", r.Arch, runtime.GOARCH)
	case r.CPUs > float64(runtime.NumCPU()):
		return fmt.Sprintf("a task needs %g CPUs (resources.cpus), this machine has %d", r.CPUs, runtime.NumCPU())
	}
	return ""
}
