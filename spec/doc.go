// Package spec parses and validates p2pc job specs: the YAML files given to
// "p2pc run job.yaml". The full reference, with examples, is docs/spec.md.
//
// A spec names a plugin (an executable, or a Go package directory that p2pc
// builds), job-level params, and a list of task entries. Each entry is one
// of:
//
//   - an explicit task: {id: ..., params: {...}}
//   - a range generator: {range: {param: band, from: 0, to: 63, step: 1}},
//     one task per integer from..to inclusive
//   - a grid generator: {grid: {x: [1, 2], y: [a, b]}}, one task per
//     combination, first key varying slowest
//
// plus optional inputs, output folder, reduce step, per-task timeout,
// retries, and the verify and resources sections.
//
// # Parsing
//
// Parse and ParseFile return a fully validated Job with every default
// filled in, generators in Tasks (Tasks.At gives a task with its merged
// params and an id, expanded on demand: a range of a million tasks is not
// a million maps in memory), and every path made absolute against the
// spec's directory. Nothing outside the spec is touched: paths are not
// checked for existence.
//
// Decoding is strict: unknown keys, wrong types, duplicate keys, duplicate
// task ids and input names are errors. An invalid spec gives an ErrorList
// with every problem found (up to MaxErrors), each an *Error carrying
// file:line:col.
//
// # Limits
//
// The parser is safe on untrusted input. yaml.v3 only builds the node tree;
// this package walks it itself and checks, before building any value: the
// size (MaxSize), the nesting depth (MaxDepth), the number of aliases
// (MaxAliases) and how much they would expand the document (MaxAliasNodes),
// so a "billion laughs" document is rejected in time linear in its length.
// Generators are counted before any task is built: the number of tasks
// (MaxTasks) and the size of all their params together (MaxParamBytes).
//
// # Canonical form
//
// Job.Canonical gives deterministic JSON of what the job computes (not
// where its files are), the basis of the job ID; Job.TaskParamsJSON gives
// the params object a plugin receives for one task.
//
// This package imports nothing else from p2pc.
package spec
