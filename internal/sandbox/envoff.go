package sandbox

import "os"

// offByEnv: P2PC_SANDBOX=off switched confinement off for this process,
// for one figure only (the cost of confinement, measured in one run);
// p2pc prints a loud warning. Not a documented user setting.
var offByEnv = os.Getenv("P2PC_SANDBOX") == "off"

func init() {
	if offByEnv {
		disabled.on = true
	}
}

// OffByEnv reports whether P2PC_SANDBOX=off switched confinement off.
func OffByEnv() bool { return offByEnv }

// NoCgroupsEnv=1 makes a p2pc process give its plugins no cgroups, as on a
// machine without them: tasks get Rlimits instead. For tests of that
// fallback, and for a host whose cgroups p2pc must leave alone.
const NoCgroupsEnv = "P2PC_NO_CGROUPS"

var noCgroupsEnv = os.Getenv(NoCgroupsEnv) == "1"

// TaskLimits says how this process caps its plugin processes: "cgroup",
// "rlimit(nproc,as,fsize)" where it makes no cgroups, "none" with
// confinement off.
func TaskLimits() string {
	if isDisabled() {
		return "none"
	}
	if Cgroups().Version != 0 {
		return "cgroup"
	}
	return "rlimit(nproc,as,fsize)"
}
