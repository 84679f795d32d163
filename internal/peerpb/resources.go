package peerpb

import "github.com/p2pc/p2pc/spec"

// ResourcesOf is r on the wire; nil when r asks (or offers) nothing.
func ResourcesOf(r spec.Resources) *Resources {
	if r.IsZero() {
		return nil
	}
	return &Resources{Cpus: r.CPUs, Memory: r.Memory, Disk: r.Disk, Os: r.OS, Arch: r.Arch, Gpus: uint32(max(r.GPUs, 0)), Devices: r.Devices}
}

// Spec is the message as spec.Resources (zero for nil).
func (r *Resources) Spec() spec.Resources {
	if r == nil {
		return spec.Resources{}
	}
	return spec.Resources{CPUs: r.Cpus, Memory: r.Memory, Disk: r.Disk, OS: r.Os, Arch: r.Arch, GPUs: int(r.Gpus), Devices: r.Devices}
}
