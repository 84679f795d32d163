package gpu

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// fakeRoot makes a driver folder listing two GPUs whose minor numbers are
// the reverse of nvidia-smi's indexes, and their device nodes.
func fakeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for bus, info := range map[string]string{
		"0000:01:00.0": "Model: \t Fake A\nGPU UUID: \t GPU-a\nDevice Minor: \t 1\n",
		"0000:02:00.0": "Model: \t Fake B\nGPU UUID: \t GPU-b\nDevice Minor: \t 0\n",
	} {
		dir := filepath.Join(root, "proc/driver/nvidia/gpus", bus)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "information"), []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"} {
		if err := os.WriteFile(filepath.Join(root, "dev", n), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// fakeSMI puts an nvidia-smi that prints out first in PATH.
func fakeSMI(t *testing.T, out string) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte("#!/bin/sh\nprintf '"+out+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
}

func TestDetectSMI(t *testing.T) {
	root := fakeRoot(t)
	t.Setenv("P2PC_GPU_ROOT", root)
	fakeSMI(t, `0, GPU-a, Fake A, 81559, 00000000:01:00.0\n1, GPU-b, Fake B, 1024, 00000000:02:00.0\n`)
	inv, err := Detect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Devices) != 2 || len(inv.Control) != 2 || inv.Driver != filepath.Join(root, "proc/driver/nvidia") {
		t.Fatalf("inventory %+v", inv)
	}
	a := inv.Devices[0]
	if a.Index != 0 || a.Minor != 1 || a.Path != filepath.Join(root, "dev/nvidia1") || a.Memory != 81559<<20 || a.UUID != "GPU-a" {
		t.Errorf("device 0 = %+v: want index 0, minor 1 (the driver's), its node nvidia1", a)
	}
	if got := a.String(); got != "GPU 0: Fake A, 81559 MiB, GPU-a" {
		t.Errorf("String = %q", got)
	}
	if got := Summary(inv.Devices); got != "Fake A, Fake B" {
		t.Errorf("Summary = %q", got)
	}
}

func TestDetectProcOnly(t *testing.T) {
	root := fakeRoot(t)
	t.Setenv("P2PC_GPU_ROOT", root)
	t.Setenv("PATH", t.TempDir()) // no nvidia-smi
	inv, err := Detect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Devices) != 2 || inv.Devices[0].Minor != 0 || inv.Devices[0].Name != "Fake B" || inv.Devices[1].Path != filepath.Join(root, "dev/nvidia1") {
		t.Fatalf("inventory from the driver's folder: %+v", inv.Devices)
	}
}

func TestDetectNone(t *testing.T) {
	t.Setenv("P2PC_GPU_ROOT", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	inv, err := Detect(context.Background())
	if err != nil || len(inv.Devices) != 0 {
		t.Fatalf("no driver, no nvidia-smi: %+v, %v; want none and no error", inv, err)
	}
}

func TestDetectSMIFails(t *testing.T) {
	t.Setenv("P2PC_GPU_ROOT", t.TempDir())
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte("#!/bin/sh\necho driver mismatch >&2\nexit 9\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	if _, err := Detect(context.Background()); err == nil {
		t.Fatal("a failing nvidia-smi with no driver folder: no error")
	}
}

func TestParseSMIBad(t *testing.T) {
	for _, out := range []string{"x, GPU-a, A, 1\n", "0, GPU-a\n"} {
		if _, err := parseSMI([]byte(out)); err == nil {
			t.Errorf("parseSMI(%q): no error", out)
		}
	}
}

func TestSelect(t *testing.T) {
	inv := Inventory{Devices: []Device{{Index: 0, Name: "A"}, {Index: 1, Name: "A"}}}
	for _, tt := range []struct {
		want string
		n    int
		err  bool
	}{{"off", 0, false}, {"0", 0, false}, {"all", 2, false}, {"1", 1, false}, {"3", 0, true}, {"-1", 0, true}, {"two", 0, true}} {
		ds, err := Select(inv, tt.want)
		if (err != nil) != tt.err || len(ds) != tt.n {
			t.Errorf("Select(%q) = %d devices, %v; want %d, error %v", tt.want, len(ds), err, tt.n, tt.err)
		}
	}
	if got := Summary(inv.Devices); got != "2 × A" {
		t.Errorf("Summary = %q", got)
	}
}
