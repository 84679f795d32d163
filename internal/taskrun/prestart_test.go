package taskrun

import (
	"slices"
	"testing"

	"github.com/p2pc/p2pc/internal/gpu"
	"github.com/p2pc/p2pc/internal/pluginhost"
	"github.com/p2pc/p2pc/internal/sandbox"
)

// TestPreStartBindsOneGPU: a GPU slot's binding names its device alone in
// the environment and opens its node and the control nodes, not the
// other GPU's; the configuration it starts from is left as it was.
func TestPreStartBindsOneGPU(t *testing.T) {
	inv := gpu.Inventory{
		Devices: []gpu.Device{{Index: 0, UUID: "GPU-a", Name: "A", Path: "/dev/nvidia0"}, {Index: 1, Name: "B", Path: "/dev/nvidia1"}},
		Control: []string{"/dev/nvidiactl", "/dev/nvidia-uvm"},
		Driver:  "/proc/driver/nvidia",
	}
	base := pluginhost.Config{Env: make([]string, 1, 8), Sandbox: sandbox.Policy{ReadOnly: make([]string, 1, 8)}}
	base.Env[0], base.Sandbox.ReadOnly[0] = "X=1", "/job"
	for i, want := range []struct {
		visible, dev, other string
	}{{"GPU-a", "/dev/nvidia0", "/dev/nvidia1"}, {"1", "/dev/nvidia1", "/dev/nvidia0"}} {
		b := BindGPU(inv, inv.Devices[i])
		cfg := PreStart(base, b)
		if !slices.Equal(cfg.Env, []string{"X=1", "CUDA_VISIBLE_DEVICES=" + want.visible, "NVIDIA_VISIBLE_DEVICES=" + want.visible}) {
			t.Errorf("GPU %d: env %q", i, cfg.Env)
		}
		if !slices.Equal(cfg.Sandbox.Devices, []string{want.dev, "/dev/nvidiactl", "/dev/nvidia-uvm"}) || slices.Contains(cfg.Sandbox.Devices, want.other) {
			t.Errorf("GPU %d: devices %q", i, cfg.Sandbox.Devices)
		}
		if !slices.Equal(cfg.Sandbox.ReadOnly, []string{"/job", "/proc/driver/nvidia"}) {
			t.Errorf("GPU %d: read-only %q", i, cfg.Sandbox.ReadOnly)
		}
		if b.Device != inv.Devices[i].String() {
			t.Errorf("GPU %d: device %q", i, b.Device)
		}
	}
	if len(base.Env) != 1 || len(base.Sandbox.ReadOnly) != 1 || base.Env[:2][1] != "" || base.Sandbox.ReadOnly[:2][1] != "" {
		t.Errorf("PreStart changed the configuration it was given: %q %q", base.Env[:2], base.Sandbox.ReadOnly[:2])
	}
}
