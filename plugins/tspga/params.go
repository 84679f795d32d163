package main

import (
	"errors"
	"fmt"
	"math"
)

// Limits on the GA's params.
const (
	MaxPopulation  = 100000
	MaxGenerations = 10000000
	MaxIslands     = 100000
	// MaxGenes bounds population * cities (the tours held in memory).
	MaxGenes = 50000000
)

// Topologies: where an island's immigrants come from.
const (
	TopologyRing = "ring" // from island (i-1) mod islands
	TopologyAll  = "all"  // the best of every other island's
)

// Params are a task's params, the job's merged with the task's; see
// docs/plugins/tspga.md.
type Params struct {
	Instance string `json:"instance"`
	Input    string `json:"input"`
	Cities   int    `json:"cities"`
	CitySeed int64  `json:"city_seed"`
	Optimum  int64  `json:"optimum"`

	Population   int     `json:"population"`
	Generations  int     `json:"generations"`
	Tournament   int     `json:"tournament"`
	MutationRate float64 `json:"mutation_rate"`
	Seed         int64   `json:"seed"`

	Islands      int    `json:"islands"`
	Island       int    `json:"island"`
	MigrateEvery int    `json:"migrate_every"`
	Migrants     int    `json:"migrants"`
	Topology     string `json:"topology"`

	CheckpointEvery float64 `json:"checkpoint_every"`
}

// InstanceRandom names generated instances.
const InstanceRandom = "random"

// DefaultParams are the params a task gets for every key it leaves out.
func DefaultParams() Params {
	return Params{
		Cities:          50,
		CitySeed:        1,
		Population:      64,
		Generations:     300,
		Tournament:      3,
		MutationRate:    0.2,
		Seed:            1,
		Islands:         1,
		MigrateEvery:    10,
		Migrants:        2,
		Topology:        TopologyRing,
		CheckpointEvery: 2,
	}
}

// decodeParams reads params over the defaults, fills in the derived ones
// and validates them.
func decodeParams(decode func(any) error) (Params, error) {
	p := DefaultParams()
	if err := decode(&p); err != nil {
		return p, err
	}
	if p.Instance == "" && p.Input == "" {
		p.Instance = InstanceRandom
	}
	if p.Instance != InstanceRandom && p.Input == "" {
		p.Input = p.Instance + ".tsp"
	}
	return p, p.Validate()
}

// Random says whether the instance is generated rather than read.
func (p *Params) Random() bool { return p.Instance == InstanceRandom && p.Input == "" }

// Validate checks the params.
func (p *Params) Validate() error {
	switch {
	case p.Instance == InstanceRandom && p.Input != "":
		return errors.New(`tspga: instance "random" is generated: it takes no input file`)
	case p.Random() && (p.Cities < 3 || p.Cities > MaxCities):
		return fmt.Errorf("tspga: cities %d must be in [3, %d]", p.Cities, MaxCities)
	case p.Optimum < 0:
		return fmt.Errorf("tspga: optimum %d must not be negative (0: unknown)", p.Optimum)
	case p.Population < 2 || p.Population > MaxPopulation:
		return fmt.Errorf("tspga: population %d must be in [2, %d]", p.Population, MaxPopulation)
	case p.Generations < 0 || p.Generations > MaxGenerations:
		return fmt.Errorf("tspga: generations %d must be in [0, %d]", p.Generations, MaxGenerations)
	case p.Tournament < 1 || p.Tournament > p.Population:
		return fmt.Errorf("tspga: tournament %d must be in [1, population %d]", p.Tournament, p.Population)
	case !(p.MutationRate >= 0 && p.MutationRate <= 1):
		return fmt.Errorf("tspga: mutation_rate %v must be in [0, 1]", p.MutationRate)
	case p.Islands < 1 || p.Islands > MaxIslands:
		return fmt.Errorf("tspga: islands %d must be in [1, %d]", p.Islands, MaxIslands)
	case p.Island < 0 || p.Island >= p.Islands:
		return fmt.Errorf("tspga: island %d must be in [0, islands %d)", p.Island, p.Islands)
	case p.MigrateEvery < 1:
		return fmt.Errorf("tspga: migrate_every %d must be at least 1", p.MigrateEvery)
	case p.Migrants < 0 || p.Migrants >= p.Population:
		return fmt.Errorf("tspga: migrants %d must be in [0, population %d)", p.Migrants, p.Population)
	case p.Topology != TopologyRing && p.Topology != TopologyAll:
		return fmt.Errorf("tspga: topology %q must be %q or %q", p.Topology, TopologyRing, TopologyAll)
	case math.IsNaN(p.CheckpointEvery) || p.CheckpointEvery < 0 || p.CheckpointEvery > 1e6:
		return fmt.Errorf("tspga: checkpoint_every %v must be in [0, 1e6] seconds (0: never)", p.CheckpointEvery)
	}
	return nil
}

// checkSize checks the params against the instance's size.
func (p *Params) checkSize(n int) error {
	if int64(p.Population)*int64(n) > MaxGenes {
		return fmt.Errorf("tspga: population %d of %d-city tours is over %d cities in all", p.Population, n, MaxGenes)
	}
	return nil
}

// migrating says whether the island exchanges migrants at all.
func (p *Params) migrating() bool { return p.Islands > 1 && p.Migrants > 0 }
