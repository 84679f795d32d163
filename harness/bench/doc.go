// Package bench is `p2pc bench`: it reproduces the seed papers'
// experiments on this machine with real p2pc processes in labs (package
// harness) and writes raw JSON, CSV, SVG charts and markdown summaries
// into a results folder: a new temporary one by default, the repository's
// results/ only with Options.Publish (never with Quick). Every suite's
// rows.json carries the run that wrote it (RunStamp), and the summaries
// rebuilt from every folder say per section which run and date it is.
//
// Each suite is one file with a type implementing Suite, registered from
// init; its parameters live under `suites: NAME:` in
// benchmarks/bench.yaml. Every headline figure is a median over rounds
// with a 95% bootstrap interval (MedianCI). Each peer runs under a CPU
// quota, and the setups must add up to fewer cores than the machine has.
//
// docs/bench.md describes the suites, the method and how to add a suite.
package bench
