//go:build !linux

package sandbox

// Probe: outside Linux nothing is confined.
func Probe() Status { return Status{Disabled: isDisabled()} }

// Confinement: outside Linux there is nothing to prepare.
type Confinement struct{ pol Policy }

// NewConfinement returns p as it is.
func NewConfinement(p Policy) *Confinement { return &Confinement{pol: p} }

// Policy is the confinement's policy.
func (c *Confinement) Policy() Policy { return c.pol }

// Close has nothing to let go.
func (c *Confinement) Close() error { return nil }

// ConfineThread confines nothing outside Linux (Probe says so).
func ConfineThread(Policy) (Status, error) { return Probe(), nil }

// Floor sets no limits outside Linux.
func Floor(int, Limits) error { return nil }

// Rlimits does nothing outside Linux.
func Rlimits(int, Limits) error { return nil }
