// Package swarmsim runs a real `p2pc run` coordinator against many light
// peers in this process: each speaks the Peer protocol (internal/peerpb)
// over mutual TLS 1.3 on loopback with an identity of its own, admits
// every job, and answers each lease after a fixed wait with an empty
// result. It measures what the coordinator costs as the swarm grows: the
// time until every peer holds a lease, tasks per second, the
// coordinator's CPU time and resident memory.
//
// A light peer gossips nowhere (its Info names an address where nothing
// listens) and fetches neither plugin nor inputs: what it leaves out is
// listed in docs/design/scale.md beside the figures.
package swarmsim
