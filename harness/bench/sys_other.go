//go:build !unix

package bench

import (
	"errors"
	"syscall"
)

func procGroup() *syscall.SysProcAttr { return nil }

func killGroup(int) error { return errors.New("process groups need unix") }

func killGroupNow(int) error { return errors.New("process groups need unix") }
