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
