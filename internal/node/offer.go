package node

import (
	"runtime"

	"github.com/p2pc/p2pc/internal/gpu"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/taskrun"
	"github.com/p2pc/p2pc/spec"
)

// offer is what this peer offers one task: its platform, the CPUs and
// memory its tasks may use (--cpus, --memory), its block store's cap
// (--disk) and its GPU slots (--gpus). Jobs are admitted against it
// (misfit), and Info reports it.
func (n *Node) offer() spec.Resources {
	v := n.cfg.Volunteer
	o := spec.Resources{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: n.cpus(), Memory: v.Memory, Disk: v.Disk, GPUs: len(n.cfg.GPUs.Devices)}
	for _, d := range n.cfg.GPUs.Devices {
		o.Devices = append(o.Devices, d.String())
	}
	return o
}

// AllSlots counts the CPU slots and the GPU slots.
func (n *Node) AllSlots() int { return n.allSlots() }

// GPUSummary describes the GPUs the node offers (gpu.Summary).
func (n *Node) GPUSummary() string { return gpu.Summary(n.cfg.GPUs.Devices) }

// gpuBinding is the binding of the GPU slot of device i.
func (n *Node) gpuBinding(i int) taskrun.Binding {
	return taskrun.BindGPU(n.cfg.GPUs, n.cfg.GPUs.Devices[i])
}

// slotPool is the pool a slot runs the session's tasks in, and the
// device the slot binds ("" for a CPU slot). The scheduler gives a
// session of a GPU job GPU slots only, and others CPU slots only.
func (s *session) slotPool(slot int) (*pluginhost.Pool, string) {
	if i := slot - s.n.cfg.Slots; s.gpu && i >= 0 && i < len(s.gpuPools) {
		return s.gpuPools[i], s.n.gpuBinding(i).Device
	}
	return s.pool, ""
}
