package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/p2pc/p2pc/harness"
)

// Machine describes where the figures were measured.
type Machine struct {
	CPU       string    `json:"cpu"`
	Cores     int       `json:"cores"`
	MemGiB    float64   `json:"mem_gib"`
	Kernel    string    `json:"kernel"`
	OS        string    `json:"os"`
	Go        string    `json:"go"`
	Commit    string    `json:"commit"`
	Dirty     bool      `json:"dirty"`
	Date      time.Time `json:"date"`
	LoadStart string    `json:"loadavg_start"`
	LoadEnd   string    `json:"loadavg_end,omitempty"`
	Cgroup    string    `json:"cpu_quota"`
	LabMode   string    `json:"lab_mode"`
	Command   string    `json:"command"`
	Quick     bool      `json:"quick"`
	// Run names the run: its start (Date), UTC, as 20060102T150405Z.
	Run string `json:"run"`
}

// DescribeMachine gathers the machine's description; root is the
// repository (for the commit), bin the p2pc binary.
func DescribeMachine(ctx context.Context, root string) Machine {
	m := Machine{
		Cores:     runtime.NumCPU(),
		OS:        runtime.GOOS + "/" + runtime.GOARCH,
		Date:      time.Now().UTC().Truncate(time.Second),
		LoadStart: loadavg(),
		Command:   strings.Join(append([]string{"p2pc"}, os.Args[1:]...), " "),
	}
	m.Run = m.Date.Format("20060102T150405Z")
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				fmt.Sscanf(strings.TrimPrefix(line, "MemTotal:"), "%f", &kb)
			}
		}
		m.MemGiB = float64(int(kb/1048576*10+0.5)) / 10
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output(); err == nil {
		m.Go = strings.TrimSpace(string(out))
	} else {
		m.Go = runtime.Version()
	}
	git := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	m.Commit = git("rev-parse", "HEAD")
	m.Dirty = git("status", "--porcelain", "--untracked-files=no") != ""
	if ctl, err := harness.FindCPUController(); err == nil {
		m.Cgroup = ctl.String() + fmt.Sprintf(", %s period", harness.QuotaPeriod)
	} else {
		m.Cgroup = "none: " + err.Error()
	}
	return m
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Markdown describes the machine as a table.
func (m Machine) Markdown() string {
	var md Markdown
	md.P("# Machine")
	dirty := ""
	if m.Dirty {
		dirty = " (with uncommitted changes)"
	}
	md.Table([]string{"", ""}, [][]string{
		{"CPU", m.CPU},
		{"cores", fmt.Sprint(m.Cores)},
		{"memory", fmt.Sprintf("%.1f GiB", m.MemGiB)},
		{"kernel", m.Kernel + " (" + m.OS + ")"},
		{"Go", m.Go},
		{"commit", m.Commit + dirty},
		{"date", m.Date.Format(time.RFC3339)},
		{"run", m.Run},
		{"load average (1, 5, 15 min) at start / end", m.LoadStart + " / " + m.LoadEnd},
		{"CPU quotas", m.Cgroup},
		{"lab", m.LabMode},
		{"command", "`" + m.Command + "`"},
	})
	md.P("The machine is shared with other work: the load average says how busy it was around the run.")
	return md.String()
}
