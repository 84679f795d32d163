package bench

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// DefaultConfig is the bench configuration file, relative to the
// repository root.
const DefaultConfig = "benchmarks/bench.yaml"

// Config is benchmarks/bench.yaml: the heterogeneous setups and each
// suite's parameters.
type Config struct {
	// File is where the configuration was read from.
	File string `yaml:"-"`
	// Setups maps a setup's name (its number of peers) to its peers'
	// capacities in cores of CPU quota, fastest first.
	Setups map[int][]float64 `yaml:"setups"`
	// Mode is the labs' default mode: bridge (default) or loopback.
	Mode string `yaml:"mode"`
	// Pin (default true) pins the peers of a setup to CPUs so that the
	// capacities on each core add up to at most 0.95 (see PackCPUs).
	Pin *bool `yaml:"pin"`
	// Suites holds each suite's parameters: a full section and a quick
	// one whose keys override the full ones under --quick.
	Suites map[string]SuiteConfig `yaml:"suites"`
}

// SuiteConfig is one suite's section.
type SuiteConfig struct {
	Full  yaml.Node `yaml:"full"`
	Quick yaml.Node `yaml:"quick"`
}

// Setup is one heterogeneous setup: peers with given CPU capacities.
type Setup struct {
	Name int       `json:"name"`
	CPU  []float64 `json:"cpu"`
}

// Total is the sum of the capacities.
func (s Setup) Total() float64 {
	t := 0.0
	for _, c := range s.CPU {
		t += c
	}
	return t
}

// Label is "2 peers (0.9+0.6 cores)".
func (s Setup) Label() string {
	parts := make([]string, len(s.CPU))
	for i, c := range s.CPU {
		parts[i] = strconv.FormatFloat(c, 'f', -1, 64)
	}
	return fmt.Sprintf("%d peers (%s cores)", len(s.CPU), strings.Join(parts, "+"))
}

// LoadConfig reads a bench configuration strictly (unknown keys are
// errors) and validates it for a machine with cores CPUs.
func LoadConfig(path string, cores int) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench config: %w", err)
	}
	c, err := ParseConfig(b, cores)
	if err != nil {
		return nil, fmt.Errorf("bench config %s: %w", path, err)
	}
	c.File = path
	return c, nil
}

// ParseConfig decodes and validates a bench configuration.
func ParseConfig(b []byte, cores int) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	if err := c.validate(cores); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) validate(cores int) error {
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	if len(c.Setups) == 0 {
		return errors.New("no setups")
	}
	var errs []error
	for _, n := range slices.Sorted(maps.Keys(c.Setups)) {
		cpu := c.Setups[n]
		s := Setup{Name: n, CPU: cpu}
		if len(cpu) == 0 {
			errs = append(errs, fmt.Errorf("setup %d: no peers", n))
			continue
		}
		for _, x := range cpu {
			if math.IsNaN(x) || x < 0.1 || x > float64(cores) {
				errs = append(errs, fmt.Errorf("setup %d: capacity %v cores: each peer needs between 0.1 and %d cores", n, x, cores))
			}
		}
		if t := s.Total(); t >= float64(cores) {
			errs = append(errs, fmt.Errorf("setup %d: the capacities add up to %.2f cores, this machine has %d: they must add up to less, "+
				"or the peers would compete for the CPU instead of being held to their quotas (and the coordinator needs some too)", n, t, cores))
		}
	}
	if c.Mode != "" && c.Mode != "bridge" && c.Mode != "loopback" {
		errs = append(errs, fmt.Errorf("mode %q: want bridge or loopback", c.Mode))
	}
	return errors.Join(errs...)
}

// Pinned says whether setups' peers are pinned to CPUs (default true).
func (c *Config) Pinned() bool { return c.Pin == nil || *c.Pin }

// PackCPUs assigns each capacity (cores, at most 1 each) a CPU out of
// ncpu so that the capacities on one CPU add up to at most limit: first
// fit, largest first. Single-threaded peers that share a core are not
// given their quotas by the scheduler's per-core fairness (a 0.8-core peer
// sharing a core with a 0.5-core one gets about half of it); packed this
// way every peer gets its capacity, as on separate machines. ok is false
// when they do not fit (the peers then float).
func PackCPUs(caps []float64, ncpu int, limit float64) (cpus []int, ok bool) {
	order := make([]int, len(caps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(caps[b], caps[a]) })
	load := make([]float64, ncpu)
	cpus = make([]int, len(caps))
	for _, i := range order {
		placed := false
		for c := range load {
			if caps[i] <= 1 && load[c]+caps[i] <= limit+1e-9 {
				load[c] += caps[i]
				cpus[i] = c
				placed = true
				break
			}
		}
		if !placed {
			return nil, false
		}
	}
	return cpus, true
}

// SelectSetups returns the named setups, in the order given.
func (c *Config) SelectSetups(names []int) ([]Setup, error) {
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(c.Setups))
	}
	var out []Setup
	for _, n := range names {
		cpu, ok := c.Setups[n]
		if !ok {
			return nil, fmt.Errorf("no setup %d in %s (have %v)", n, c.File, slices.Sorted(maps.Keys(c.Setups)))
		}
		out = append(out, Setup{Name: n, CPU: slices.Clone(cpu)})
	}
	return out, nil
}

// Decode fills into (a pointer to a struct holding the suite's
// defaults) from the suite's full section and, if quick, its quick
// section on top. Unknown keys are errors; a missing section keeps the
// defaults.
func (c *Config) Decode(suite string, quick bool, into any) error {
	sc, ok := c.Suites[suite]
	if !ok {
		return nil
	}
	nodes := []*yaml.Node{&sc.Full}
	if quick {
		nodes = append(nodes, &sc.Quick)
	}
	for _, n := range nodes {
		if n.Kind == 0 {
			continue
		}
		b, err := yaml.Marshal(n)
		if err != nil {
			return fmt.Errorf("bench config: suite %s: %w", suite, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(into); err != nil {
			return fmt.Errorf("bench config: suite %s (line %d): %w", suite, n.Line, err)
		}
	}
	return nil
}
