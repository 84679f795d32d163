package taskrun

import (
	"slices"

	"github.com/p2pc/p2pc/internal/gpu"
	"github.com/p2pc/p2pc/internal/pluginhost"
)

// Binding is what a slot binds for the plugin processes that run its
// tasks: environment, device files and read-only paths their sandbox
// lets them use, and the bound device's name for the report. The zero
// Binding binds nothing (a CPU slot).
type Binding struct {
	Device   string   // the bound device, as the report names it; "" for none
	Env      []string // KEY=value
	Devices  []string // device files the tasks may open
	ReadOnly []string // further paths the tasks may read
}

// BindGPU is the binding of a GPU slot to d: CUDA_VISIBLE_DEVICES and
// NVIDIA_VISIBLE_DEVICES name d alone, and the sandbox opens d's node and
// the driver's control nodes, not the other GPUs' nodes.
func BindGPU(inv gpu.Inventory, d gpu.Device) Binding {
	b := Binding{
		Device:  d.String(),
		Env:     []string{"CUDA_VISIBLE_DEVICES=" + d.Visible(), "NVIDIA_VISIBLE_DEVICES=" + d.Visible()},
		Devices: append([]string{d.Path}, inv.Control...),
	}
	if inv.Driver != "" {
		b.ReadOnly = []string{inv.Driver}
	}
	return b
}

// PreStart is the step before a slot's plugin processes start: it
// returns cfg with the slot's binding applied (environment, sandbox
// paths). A pool made from it binds every process it starts.
func PreStart(cfg pluginhost.Config, b Binding) pluginhost.Config {
	cfg.Env = append(slices.Clone(cfg.Env), b.Env...)
	cfg.Sandbox.Devices = append(slices.Clone(cfg.Sandbox.Devices), b.Devices...)
	cfg.Sandbox.ReadOnly = append(slices.Clone(cfg.Sandbox.ReadOnly), b.ReadOnly...)
	return cfg
}
