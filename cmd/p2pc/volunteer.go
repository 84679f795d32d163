package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"gopkg.in/yaml.v3"

	"github.com/p2pc/p2pc/internal/node"
	"github.com/p2pc/p2pc/internal/sandbox"
	"github.com/p2pc/p2pc/spec"
)

// VolunteerFlags are the machine owner's controls of p2pc join, also
// settable in a YAML file (--config).
type VolunteerFlags struct {
	Config        kong.ConfigFlag `help:"Read flags from a YAML file: keys are the long flag names (cpus: 1.5, memory: 4GiB, pause-when-busy: 50, slots: 2, ...); flags given on the command line win." type:"existingfile" placeholder:"FILE"`
	CPUs          float64         `name:"cpus" help:"CPUs all tasks together may use (fractional, e.g. 1.5; a CPU quota). Jobs asking more per task (resources.cpus) are refused. Default: no cap." placeholder:"N"`
	Memory        string          `help:"Memory all tasks together may use (e.g. 4GiB). A task gets its job's resources.memory, else this divided by --slots (at most 2 GiB); jobs asking more than this per task are refused. Default: no cap for all, 2 GiB per task." placeholder:"SIZE"`
	Disk          string          `help:"Disk all tasks' work folders together may use (e.g. 20GiB): each task gets this divided by --slots. The block store holds at most this too (blocks no job uses go first; jobs whose plugin and inputs are larger are refused). So do the jobs handed to the swarm kept here (bundles, output copies): a copy that does not fit is refused, never made room for. Default: 4 GiB per task, no cap on the store." placeholder:"SIZE"`
	Idle          bool            `help:"Run tasks at idle priority (SCHED_IDLE), so the owner's programs come first; --no-idle for normal priority." default:"true" negatable:""`
	PauseWhenBusy float64         `name:"pause-when-busy" help:"Pause tasks (freeze them, take no new leases) while the machine's other programs use more than PCT % of its CPU for 3 s; resume when they use less for 3 s. Default: never pause." placeholder:"PCT"`
	KeepResults   time.Duration   `name:"keep-results" help:"When a job's submitter goes away (killed, crashed, cut off), let its running tasks finish and keep their results, and those sent just before, this long; a rerun of the same job within it takes them over instead of running them again. 0: stop the tasks, drop the results." default:"10m" placeholder:"DURATION"`
}

// volunteer checks the flags and returns them as node.Volunteer.
func (f *VolunteerFlags) volunteer() (node.Volunteer, error) {
	v := node.Volunteer{CPUs: f.CPUs, Idle: f.Idle, PauseWhenBusy: f.PauseWhenBusy}
	if f.CPUs < 0 {
		return v, fmt.Errorf("--cpus: must be at least 0, got %g", f.CPUs)
	}
	if f.KeepResults < 0 {
		return v, fmt.Errorf("--keep-results: must be at least 0, got %s", f.KeepResults)
	}
	if f.PauseWhenBusy < 0 || f.PauseWhenBusy >= 100 {
		return v, fmt.Errorf("--pause-when-busy: a percentage from 0 to 99, got %g", f.PauseWhenBusy)
	}
	for _, s := range []struct {
		flag, val string
		to        *int64
	}{{"--memory", f.Memory, &v.Memory}, {"--disk", f.Disk, &v.Disk}} {
		if s.val == "" {
			continue
		}
		n, err := spec.ParseSize(s.val)
		if err != nil {
			return v, fmt.Errorf("%s: %w", s.flag, err)
		}
		*s.to = n
	}
	return v, nil
}

// confinementLine is what p2pc join prints on stderr at start: how tasks
// are confined and capped on this machine.
func confinementLine(n *node.Node, allowNetwork bool, v node.Volunteer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tasks confined: %s allow-network=%t", n.ConfinementLine(), allowNetwork)
	if v.CPUs > 0 {
		fmt.Fprintf(&b, " cpus=%g", v.CPUs)
	}
	if v.Memory > 0 {
		fmt.Fprintf(&b, " memory=%s", sandbox.FormatSize(v.Memory))
	}
	if v.Disk > 0 {
		fmt.Fprintf(&b, " disk=%s", sandbox.FormatSize(v.Disk))
	}
	if v.Idle {
		b.WriteString(" priority=idle")
	}
	if v.PauseWhenBusy > 0 {
		fmt.Fprintf(&b, " pause-when-busy=%g%%", v.PauseWhenBusy)
	}
	return b.String()
}

// sandboxOffWarning is printed when P2PC_SANDBOX=off switched
// confinement off (for the benchmark figure of its cost only).
func sandboxOffWarning() {
	if sandbox.OffByEnv() {
		fmt.Fprintln(os.Stderr, "p2pc: WARNING: P2PC_SANDBOX=off: tasks run UNCONFINED (no Landlock, network namespace, cgroups or limits); for measuring the cost of confinement only, never on a real swarm")
	}
}

// yamlConfig is the kong configuration loader of --config: a YAML
// mapping from long flag names (or with _ for -) to values.
func yamlConfig(r io.Reader) (kong.Resolver, error) {
	var raw map[string]any
	if err := yaml.NewDecoder(r).Decode(&raw); err != nil && err != io.EOF {
		return nil, fmt.Errorf("config file: %w", err)
	}
	values := map[string]string{}
	for k, v := range raw {
		switch x := v.(type) {
		case []any:
			parts := make([]string, len(x))
			for i, p := range x {
				parts[i] = fmt.Sprint(p)
			}
			values[strings.ReplaceAll(k, "_", "-")] = strings.Join(parts, ",")
		case map[string]any, nil:
			return nil, fmt.Errorf("config file: %s: want a single value", k)
		default:
			values[strings.ReplaceAll(k, "_", "-")] = fmt.Sprint(x)
		}
	}
	return &configResolver{values: values}, nil
}

type configResolver struct{ values map[string]string }

// Validate refuses keys that name no flag.
func (c *configResolver) Validate(app *kong.Application) error {
	known := map[string]bool{}
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, f := range n.Flags {
			known[f.Name] = true
		}
		for _, ch := range n.Children {
			walk(ch)
		}
	}
	walk(app.Node)
	var unknown []string
	for k := range c.values {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("config file: unknown keys %s (keys are long flag names, e.g. cpus, pause-when-busy)", strings.Join(unknown, ", "))
	}
	return nil
}

func (c *configResolver) Resolve(_ *kong.Context, _ *kong.Path, flag *kong.Flag) (any, error) {
	if v, ok := c.values[flag.Name]; ok {
		return v, nil
	}
	return nil, nil
}
