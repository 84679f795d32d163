//go:build !linux

package harness

import "errors"

func mountCPUv1(string) error { return errors.New("cgroups need Linux") }
