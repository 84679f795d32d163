package spec

import (
	"fmt"
	"math"
	"strconv"
)

// Resources is one resource model for both sides of a fit: what a task
// needs (a spec's resources, a Hello's) and what a slot or peer offers
// (p2pc join's caps, its GPUs). Offer.Admit(need) is the one admission
// check; adding a resource kind is a field here, a case in Admit, its
// key in the spec parser and its field on the wire (peerpb.Resources).
//
// In a need, zero values mean "no requirement". In an offer, zero
// Memory, Disk or CPUs mean "no cap", empty OS or Arch "any"; GPUs
// counts the GPU slots, each binding one device, so zero means none.
type Resources struct {
	CPUs   float64
	Memory int64 // bytes; in a need also the task's memory limit (docs/sandbox.md)
	// Disk is, in a need, what the job's plugin and inputs take; in an
	// offer, what the peer's block store may hold (p2pc join --disk).
	Disk int64
	OS   string
	Arch string
	GPUs int // a need asks for 0 or 1: a GPU slot binds one device
	// Devices describe the offered devices, one line each ("GPU 0:
	// NVIDIA H200, 141 GiB, GPU-..."); a need leaves it empty. Admit
	// does not read it.
	Devices []string
}

// IsZero reports whether r asks (or offers) nothing.
func (r Resources) IsZero() bool {
	return r.CPUs == 0 && r.Memory == 0 && r.Disk == 0 && r.OS == "" && r.Arch == "" && r.GPUs == 0 && len(r.Devices) == 0
}

// MaxTaskGPUs is the most GPUs one task may ask for: a GPU slot binds
// one device.
const MaxTaskGPUs = 1

// Misfit says which resource an offer lacks: Key is the spec key
// (resources.Key), Need and Offer the amounts as text.
type Misfit struct {
	Key, Need, Offer string
}

// Reason is the misfit as a sentence about who offers (such as "this
// peer"); hint, when not empty, names where the offer comes from (a
// flag) and ends it in parentheses.
func (m Misfit) Reason(who, hint string) string {
	if hint != "" {
		hint = " (" + hint + ")"
	}
	switch m.Key {
	case "os", "arch":
		return fmt.Sprintf("the job's resources.%s is %s, %s is %s", m.Key, m.Need, who, m.Offer)
	case "disk":
		return fmt.Sprintf("the job's plugin and inputs take %s, %s's block store holds at most %s%s", m.Need, who, m.Offer, hint)
	}
	return fmt.Sprintf("a task needs %s (resources.%s), %s gives its tasks %s%s", m.Need, m.Key, who, m.Offer, hint)
}

// Admit reports whether the offer holds the need, and if not the first
// resource it lacks, in this order: disk, os, arch, memory, cpus, gpus.
func (offer Resources) Admit(need Resources) (ok bool, why Misfit) {
	switch {
	case need.Disk > 0 && offer.Disk > 0 && need.Disk > offer.Disk:
		return false, Misfit{"disk", FormatSize(need.Disk), FormatSize(offer.Disk)}
	case need.OS != "" && offer.OS != "" && need.OS != offer.OS:
		return false, Misfit{"os", need.OS, offer.OS}
	case need.Arch != "" && offer.Arch != "" && need.Arch != offer.Arch:
		return false, Misfit{"arch", need.Arch, offer.Arch}
	case need.Memory > 0 && offer.Memory > 0 && need.Memory > offer.Memory:
		return false, Misfit{"memory", FormatSize(need.Memory) + " of memory", FormatSize(offer.Memory)}
	case need.CPUs > 0 && offer.CPUs > 0 && need.CPUs > offer.CPUs:
		return false, Misfit{"cpus", fmt.Sprintf("%g CPUs", need.CPUs), fmt.Sprintf("%g", offer.CPUs)}
	case need.GPUs > offer.GPUs:
		return false, Misfit{"gpus", plural(need.GPUs, "GPU"), plural(offer.GPUs, "GPU")}
	}
	return true, Misfit{}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// FormatSize writes a number of bytes with the largest power-of-1024
// unit that keeps it at least 1, one decimal at most ("1.5 GiB").
func FormatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f, u := float64(n), 0
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if u == 0 {
		return strconv.FormatInt(n, 10) + " B"
	}
	return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) + " " + units[u]
}
