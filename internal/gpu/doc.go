// Package gpu finds a machine's NVIDIA GPUs without cgo: from
// `nvidia-smi --query-gpu` when it runs, else from /proc/driver/nvidia.
// An Inventory names each device's node (/dev/nvidiaN) and the control
// nodes every task on a GPU needs (nvidiactl, nvidia-uvm); Select picks
// the devices p2pc join offers (--gpus).
//
// P2PC_GPU_ROOT is a test-only setting, not a user one: device nodes
// are read under ROOT/dev and driver files under ROOT/proc, so that tests
// run a fake inventory (plain files and a fake nvidia-smi on PATH) on any
// machine.
package gpu
