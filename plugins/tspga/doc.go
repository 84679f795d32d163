// Command tspga is the p2pc plugin of the island-model genetic algorithm
// for the travelling salesman problem that Fenech and Vella used: each
// task is one island that evolves its own population, and the islands
// exchange their best tours through job-global variables. The reduce step
// picks the best tour of all islands and plots how each converged.
//
// Invariants: an island's job-global operations depend only on its
// generation count and on what its earlier Loads returned, so an island
// started again replays the coordinator's log of them and publishes
// nothing twice. Without migration an island's output is a function of
// its params alone, byte-identical on every machine and after a resume
// from a checkpoint. With migration the output depends on the peers'
// speeds, so such jobs must run without replicas.
//
// docs/plugins/tspga.md gives the params, the algorithm and the formats
// of the migration variable, the checkpoint and the output.
package main
