//go:build !linux

package sandbox

// Probe: outside Linux nothing is confined.
func Probe() Status { return Status{Disabled: isDisabled()} }

// ConfineThread confines nothing outside Linux (Probe says so).
func ConfineThread(Policy) (Status, error) { return Probe(), nil }

// Floor sets no limits outside Linux.
func Floor(int) error { return nil }
