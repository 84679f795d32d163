package sandbox

import (
	"errors"
	"maps"
	"testing"
)

func TestProcCgroups(t *testing.T) {
	in := "12:pids:/user.slice\n4:memory:/process_api/f6c0\n3:cpu,cpuacct:/a b\n9:name=systemd:/\n0::/init.scope\nbad line\n"
	want := map[string]string{"pids": "/user.slice", "memory": "/process_api/f6c0", "cpu": "/a b", "cpuacct": "/a b", "": "/init.scope"}
	if got := procCgroups([]byte(in)); !maps.Equal(got, want) {
		t.Errorf("procCgroups = %v, want %v", got, want)
	}
}

func TestCgroupMounts(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		v1       map[string]string
		v2       string
	}{
		{"hybrid", "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n" +
			"cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n" +
			"cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n" +
			"cgroup /sys/fs/cgroup/systemd cgroup rw,name=systemd 0 0\n" +
			"cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n",
			map[string]string{"memory": "/sys/fs/cgroup/memory", "cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct"},
			"/sys/fs/cgroup/unified"},
		{"v2 only", "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n", map[string]string{}, "/sys/fs/cgroup"},
		{"escaped", `cgroup /mnt/c\040g cgroup rw,pids 0 0`, map[string]string{"pids": "/mnt/c g"}, ""},
		{"none", "proc /proc proc rw 0 0\n", map[string]string{}, ""},
	} {
		v1, v2 := cgroupMounts([]byte(tt.in))
		if !maps.Equal(v1, tt.v1) || v2 != tt.v2 {
			t.Errorf("%s: cgroupMounts = %v, %q; want %v, %q", tt.name, v1, v2, tt.v1, tt.v2)
		}
	}
}

func TestKeyed(t *testing.T) {
	events := []byte("low 0\nhigh 0\nmax 4\noom 2\noom_kill 1\n")
	for key, want := range map[string]int64{"oom_kill": 1, "max": 4, "oom": 2, "missing": -1} {
		if got := keyed(events, key); got != want {
			t.Errorf("keyed(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestCPUQuota(t *testing.T) {
	for _, tt := range []struct {
		cpus  float64
		quota int64
		max   string
	}{
		{0, -1, "max 10000"},
		{1, 10000, "10000 10000"},
		{0.5, 5000, "5000 10000"},
		{2.25, 22500, "22500 10000"},
		{0.01, 1000, "1000 10000"}, // the kernel's floor is 1 ms
	} {
		if got := cpuQuota(tt.cpus); got != tt.quota {
			t.Errorf("cpuQuota(%v) = %d, want %d", tt.cpus, got, tt.quota)
		}
		if got := cpuMax(tt.cpus); got != tt.max {
			t.Errorf("cpuMax(%v) = %q, want %q", tt.cpus, got, tt.max)
		}
	}
}

func TestLimitError(t *testing.T) {
	for _, tt := range []struct {
		err  *LimitError
		want string
	}{
		{&LimitError{What: "memory", Limit: 256 << 20}, "exceeded memory limit 256 MiB"},
		{&LimitError{What: "memory", Limit: 3 << 29}, "exceeded memory limit 1.5 GiB"},
		{&LimitError{What: "pids", Limit: 64}, "process limit 64 reached"},
		{&LimitError{What: "disk", Limit: 1000}, "exceeded disk limit 1000 B"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.err, got, tt.want)
		}
		if !errors.Is(tt.err, ErrLimit) {
			t.Errorf("%+v is not ErrLimit", tt.err)
		}
	}
}

func TestCgroupStatus(t *testing.T) {
	for _, tt := range []struct {
		st   CgroupStatus
		want string
	}{
		{CgroupStatus{}, "none"},
		{CgroupStatus{Reason: "not Linux"}, "none (not Linux)"},
		{CgroupStatus{Version: 1, Controllers: []string{"memory", "pids", "cpu", "freezer"}}, "v1(memory,pids,cpu,freezer)"},
		{CgroupStatus{Version: 2, Controllers: []string{"memory", "pids"}}, "v2(memory,pids)"},
	} {
		if got := tt.st.String(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.st, got, tt.want)
		}
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	if got := (Limits{}).WithDefaults(); got.Memory != DefaultMemory || got.Pids != DefaultPids {
		t.Errorf("defaults: %+v", got)
	}
	if got := (Limits{Memory: 1, Pids: 2}).WithDefaults(); got.Memory != 1 || got.Pids != 2 {
		t.Errorf("set values changed: %+v", got)
	}
}
