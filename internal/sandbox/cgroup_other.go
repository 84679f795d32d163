//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
	"time"
)

var errNoCgroups = errors.New("no cgroups outside Linux")

// Cgroup: outside Linux there are none (NewCgroup fails).
type Cgroup struct{}

// Cgroups says that there are none outside Linux.
func Cgroups() CgroupStatus { return CgroupStatus{Reason: "not Linux"} }

// CloseCgroups has nothing to remove outside Linux.
func CloseCgroups() error { return nil }

// NewCgroup fails outside Linux.
func NewCgroup(Limits) (*Cgroup, error) { return nil, errNoCgroups }

// StartConfined starts cmd confined as ConfineThread does (no cgroup,
// no idle priority outside Linux).
func StartConfined(cmd *exec.Cmd, conf *Confinement, _ *Cgroup, _ Limits) (Status, error) {
	st, err := ConfineThread(conf.pol)
	if err != nil {
		return st, err
	}
	return st, cmd.Start()
}

func (c *Cgroup) Limits() Limits               { return Limits{} }
func (c *Cgroup) Procs() []int                 { return nil }
func (c *Cgroup) KillOthers(int) (bool, error) { return false, nil }
func (c *Cgroup) Kill() error                  { return nil }
func (c *Cgroup) Close() error                 { return nil }
func (c *Cgroup) Exceeded() error              { return nil }
func (c *Cgroup) Dir(string) string            { return "" }
func SetShare(float64, int64) error            { return errNoCgroups }
func Freeze(bool) error                        { return errNoCgroups }
func Frozen() bool                             { return false }
func CPUUsage() (time.Duration, error)         { return 0, errNoCgroups }
func TreeDir(string) string                    { return "" }

// Warm has nothing to make ahead outside Linux.
func Warm() (wait func()) { return func() {} }
