package gpu

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Device is one GPU.
type Device struct {
	Index  int    // nvidia-smi's index
	Minor  int    // N of its node /dev/nvidiaN
	UUID   string // GPU-...; empty if unknown
	Name   string
	Memory int64  // bytes; 0 if unknown
	Path   string // its device node
	busID  string // while detecting
}

// String describes d in one line: "GPU 0: NVIDIA H200, 140 GiB, GPU-...".
func (d Device) String() string {
	s := fmt.Sprintf("GPU %d: %s", d.Index, d.Name)
	if d.Memory > 0 {
		s += fmt.Sprintf(", %d MiB", d.Memory>>20)
	}
	if d.UUID != "" {
		s += ", " + d.UUID
	}
	return s
}

// Visible is the value of CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES
// that names d alone: its UUID, which does not depend on device order,
// else its index.
func (d Device) Visible() string {
	if d.UUID != "" {
		return d.UUID
	}
	return strconv.Itoa(d.Index)
}

// Inventory is a machine's GPUs and the control nodes a task on any of
// them needs.
type Inventory struct {
	Devices []Device
	// Control are the nodes present among nvidiactl, nvidia-uvm and
	// nvidia-uvm-tools.
	Control []string
	// Driver is the driver's information folder (/proc/driver/nvidia)
	// when present: tools such as nvidia-smi read it.
	Driver string
}

// root is P2PC_GPU_ROOT (test only): where /dev and /proc are.
func root() string { return os.Getenv("P2PC_GPU_ROOT") }

// Detect finds the machine's NVIDIA GPUs. No driver and no nvidia-smi
// is not an error: the inventory is empty. An nvidia-smi that fails
// while the driver's folder lists GPUs falls back to the folder.
func Detect(ctx context.Context) (Inventory, error) {
	r := root()
	dev := filepath.Join(r, "/dev")
	driver := filepath.Join(r, "/proc/driver/nvidia")
	proc, procErr := readProc(filepath.Join(driver, "gpus"))
	inv := Inventory{}
	if fi, err := os.Stat(driver); err == nil && fi.IsDir() {
		inv.Driver = driver
	}
	smi, smiErr := querySMI(ctx)
	switch {
	case smiErr == nil:
		inv.Devices = smi
		for i := range inv.Devices {
			d := &inv.Devices[i]
			d.Minor = d.Index
			if p, ok := proc[busKey(d.busID)]; ok {
				d.Minor = p.Minor
			}
		}
	case len(proc) > 0:
		for _, p := range proc {
			inv.Devices = append(inv.Devices, p)
		}
		sortDevices(inv.Devices)
		for i := range inv.Devices {
			inv.Devices[i].Index = i
		}
	case errors.Is(smiErr, exec.ErrNotFound) || errors.Is(smiErr, os.ErrNotExist):
		if procErr != nil && !errors.Is(procErr, os.ErrNotExist) {
			return Inventory{}, procErr
		}
		return Inventory{}, nil
	default:
		return Inventory{}, smiErr
	}
	for i := range inv.Devices {
		inv.Devices[i].Path = filepath.Join(dev, "nvidia"+strconv.Itoa(inv.Devices[i].Minor))
		inv.Devices[i].busID = ""
	}
	for _, name := range []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"} {
		if _, err := os.Stat(filepath.Join(dev, name)); err == nil {
			inv.Control = append(inv.Control, filepath.Join(dev, name))
		}
	}
	return inv, nil
}

// smiQuery is what Detect asks nvidia-smi, one line per GPU.
const smiQuery = "index,uuid,name,memory.total,pci.bus_id"

// querySMI runs nvidia-smi (found in PATH), bounded by 20 s.
func querySMI(ctx context.Context) ([]Device, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "--query-gpu="+smiQuery, "--format=csv,noheader,nounits").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return nil, fmt.Errorf("nvidia-smi: %w", err)
	}
	return parseSMI(out)
}

// parseSMI reads nvidia-smi's CSV answer to smiQuery (memory in MiB).
func parseSMI(out []byte) ([]Device, error) {
	var ds []Device
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if len(f) < 4 {
			return nil, fmt.Errorf("nvidia-smi: unexpected line %q", line)
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil || idx < 0 {
			return nil, fmt.Errorf("nvidia-smi: bad index in %q", line)
		}
		d := Device{Index: idx, UUID: f[1], Name: f[2]}
		if mib, err := strconv.ParseInt(f[3], 10, 64); err == nil && mib > 0 {
			d.Memory = mib << 20
		}
		if len(f) > 4 {
			d.busID = f[4]
		}
		ds = append(ds, d)
	}
	sortDevices(ds)
	return ds, sc.Err()
}

// readProc reads the driver's folder of GPUs, one folder per PCI bus ID
// holding an "information" file: the devices by bus key.
func readProc(dir string) (map[string]Device, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]Device{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "information"))
		if err != nil {
			continue
		}
		d := Device{Minor: -1}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch strings.TrimSpace(k) {
			case "Model":
				d.Name = v
			case "GPU UUID":
				d.UUID = v
			case "Device Minor":
				d.Minor, _ = strconv.Atoi(v)
			}
		}
		if d.Minor >= 0 {
			out[busKey(e.Name())] = d
		}
	}
	return out, nil
}

// busKey normalizes a PCI bus ID: nvidia-smi writes an 8-digit domain
// (00000000:18:00.0), the driver's folder a 4-digit one (0000:18:00.0).
func busKey(id string) string {
	dom, rest, ok := strings.Cut(strings.ToLower(id), ":")
	if !ok {
		return id
	}
	n, err := strconv.ParseUint(dom, 16, 32)
	if err != nil {
		return id
	}
	return strconv.FormatUint(n, 16) + ":" + rest
}

// sortDevices orders devices by index, then minor number.
func sortDevices(ds []Device) {
	slices.SortFunc(ds, func(a, b Device) int { return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.Minor, b.Minor)) })
}

// Select picks the devices to offer by p2pc join's --gpus: "off" (or
// "0") none, "all" every one, N the first N (an error if there are fewer).
func Select(inv Inventory, want string) ([]Device, error) {
	switch want {
	case "", "off", "0":
		return nil, nil
	case "all":
		return inv.Devices, nil
	}
	n, err := strconv.Atoi(want)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("--gpus %q: want a number, all or off", want)
	}
	if n > len(inv.Devices) {
		return nil, fmt.Errorf("--gpus %d: this machine has %d NVIDIA GPU(s)", n, len(inv.Devices))
	}
	return inv.Devices[:n], nil
}

// Summary describes devices in a few words for gossip and listings:
// "2 × NVIDIA H200", or the models joined by ", " when they differ; at
// most 80 bytes; "" for none.
func Summary(ds []Device) string {
	var names []string
	count := map[string]int{}
	for _, d := range ds {
		if count[d.Name] == 0 {
			names = append(names, d.Name)
		}
		count[d.Name]++
	}
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name
		if c := count[name]; c > 1 {
			parts[i] = fmt.Sprintf("%d × %s", c, name)
		}
	}
	s := strings.Join(parts, ", ")
	if len(s) > 80 {
		s = strings.ToValidUTF8(s[:77], "") + "..."
	}
	return s
}
