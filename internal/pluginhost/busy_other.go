//go:build !linux

package pluginhost

// cpusBusy: not known on this system; a pool grows as the wait alone
// says.
func cpusBusy() bool { return false }
