package spec

import (
	"strings"
	"testing"
)

func TestAdmit(t *testing.T) {
	offer := Resources{OS: "linux", Arch: "amd64", CPUs: 4, Memory: 8 << 30, Disk: 1 << 30, GPUs: 1}
	for _, tt := range []struct {
		name  string
		offer Resources
		need  Resources
		key   string // "" admitted
		why   string
	}{
		{"nothing asked", offer, Resources{}, "", ""},
		{"all within", offer, Resources{OS: "linux", Arch: "amd64", CPUs: 4, Memory: 8 << 30, Disk: 1 << 30, GPUs: 1}, "", ""},
		{"no caps", Resources{}, Resources{CPUs: 64, Memory: 1 << 40, Disk: 1 << 40, OS: "plan9"}, "", ""},
		{"disk", offer, Resources{Disk: 2 << 30}, "disk", "the job's plugin and inputs take 2 GiB, this peer's block store holds at most 1 GiB (--disk)"},
		{"os", offer, Resources{OS: "darwin"}, "os", "the job's resources.os is darwin, this peer is linux"},
		{"arch", offer, Resources{Arch: "arm64"}, "arch", "the job's resources.arch is arm64, this peer is amd64"},
		{"memory", offer, Resources{Memory: 9 << 30}, "memory", "a task needs 9 GiB of memory (resources.memory), this peer gives its tasks 8 GiB (--memory)"},
		{"cpus", offer, Resources{CPUs: 4.5}, "cpus", "a task needs 4.5 CPUs (resources.cpus), this peer gives its tasks 4 (--cpus)"},
		{"gpus", Resources{}, Resources{GPUs: 1}, "gpus", "a task needs 1 GPU (resources.gpus), this peer gives its tasks 0 GPUs (--gpus)"},
		{"first misfit wins", offer, Resources{OS: "darwin", GPUs: 1, Memory: 9 << 30}, "os", "resources.os is darwin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ok, why := tt.offer.Admit(tt.need)
			if ok != (tt.key == "") || why.Key != tt.key {
				t.Fatalf("Admit = %v, %+v; want key %q", ok, why, tt.key)
			}
			if ok {
				return
			}
			hint := map[string]string{"memory": "--memory", "cpus": "--cpus", "disk": "--disk", "gpus": "--gpus"}[why.Key]
			if got := why.Reason("this peer", hint); !strings.Contains(got, tt.why) {
				t.Errorf("reason %q, want %q", got, tt.why)
			}
		})
	}
}
