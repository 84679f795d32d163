// Package spec parses and validates p2pc job specs: the YAML files given
// to `p2pc run job.yaml`. docs/spec.md is the reference.
//
// Parse and ParseFile return a fully validated Job with every default
// filled in and every path made absolute against the spec's directory.
// Nothing outside the spec is touched. Task generators are expanded on
// demand by Tasks.At, so a range of a million tasks is not a million maps.
// A job with stages has Stages instead of Plugin and Tasks: each a flat
// Job, with the edges (Need) to the stages it needs, in StageOrder.
//
// Invariants: decoding is strict, and an invalid spec gives an ErrorList
// of every problem found, each an *Error with file:line:col. The parser
// is safe on untrusted input: size, depth, aliases, task count and params
// are bounded before any value is built. Job.Canonical is deterministic
// JSON of what the job computes, the basis of the job ID.
//
// This package imports nothing else of p2pc.
package spec
