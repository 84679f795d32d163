package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/p2pc/p2pc/internal/gpu"
)

// joinGPUs detects the machine's NVIDIA GPUs and keeps those --gpus
// offers ("off": none, without looking).
func joinGPUs(ctx context.Context, want string, log *slog.Logger) (gpu.Inventory, error) {
	if want == "off" || want == "0" {
		return gpu.Inventory{}, nil
	}
	inv, err := gpu.Detect(ctx)
	if err != nil {
		return gpu.Inventory{}, fmt.Errorf("--gpus %s: %w", want, err)
	}
	if len(inv.Devices) == 0 {
		log.Info("--gpus: no NVIDIA GPU found (neither nvidia-smi nor /proc/driver/nvidia lists one); no GPU slots", "gpus", want)
	}
	if inv.Devices, err = gpu.Select(inv, want); err != nil {
		return gpu.Inventory{}, err
	}
	return inv, nil
}
