// Command tspga is the p2pc plugin of the island-model genetic algorithm
// for the travelling salesman problem that Fenech and Vella used to
// evaluate their "poor man's supercomputer": each task is one island that
// evolves its own population, and every few generations the islands
// interbreed by publishing their best tours in job-global variables and
// taking in each other's. The reduce step picks the best tour of all
// islands and plots how each island converged.
//
// # Params
//
// Every key is optional; defaults in brackets. Job-level and task params
// are merged, so `island` usually comes from a range over the tasks.
//
// The instance:
//
//	instance          string  "random" for generated cities, or the name of
//	                          a TSPLIB instance ["random", or the input's]
//	input             string  job input holding the TSPLIB file
//	                          [<instance>.tsp]
//	cities            int     random: number of cities, 3 to 3000 [50]
//	city_seed         int     random: seed of the cities [1]
//	optimum           int     known optimal length, for the reduce step's
//	                          gap and plot (0: unknown) [0]
//
// Generated cities have uniform random integer coordinates in
// [0, 1000)², drawn from city_seed (the same for every island). A TSPLIB
// file must have EDGE_WEIGHT_TYPE EUC_2D and a NODE_COORD_SECTION; TYPE
// must be TSP if present, other header keys are ignored. Distances are
// TSPLIB's EUC_2D, the Euclidean distance rounded to the nearest integer,
// so every length is an exact integer and published optima (berlin52:
// 7542) compare directly.
//
// The genetic algorithm:
//
//	population        int     tours per island, 2 to 100000 [64]
//	generations       int     generations to evolve [300]
//	tournament        int     tournament size for selection [3]
//	mutation_rate     float   probability of a double-bridge kick per
//	                          offspring, 0 to 1 [0.2]
//	seed              int     seed of the GA; island i draws from the
//	                          stream (seed, i) [1]
//
// The islands:
//
//	islands           int     number of islands in the job [1]
//	island            int     this task's island, 0 to islands-1 [0]
//	migrate_every     int     generations between migrations (K) [10]
//	migrants          int     tours sent out and taken in per migration,
//	                          0 (no migration) to population-1 [2]
//	topology          string  "ring": immigrants come from island
//	                          (i-1) mod islands; "all": the best of every
//	                          other island's ["ring"]
//	checkpoint_every  float   seconds between checkpoints, 0: never [2]
//
// # Algorithm
//
// A memetic GA. The initial population is random tours, each improved by
// local search. Each generation makes `population` offspring: two parents
// chosen by tournament (the best of `tournament` drawn at random), order
// crossover (OX: a random slice of the first parent in place, the other
// cities in the order they follow the slice in the second), with
// probability mutation_rate a double-bridge kick (A B C D -> A C B D,
// which 2-opt cannot undo), then local search. Parents and offspring
// together are sorted by length, duplicates dropped, and the best
// `population` survive: elitist (μ+λ) replacement, so the best length
// never gets worse. Too few distinct tours (a tiny instance) are topped
// up with fresh random ones.
//
// The local search is 2-opt and Or-opt (moving a segment of 1 to 3
// cities, either way round) over each city's 12 nearest neighbours, with
// a queue of cities to look at. An offspring's queue starts with only the
// cities at edges that neither parent has, so a generation costs little
// more than the crossover once the population is good. On berlin52 it
// finds the optimum 7542 within the first generations (often in the
// initial population); random instances of 100 and 200 cities converge
// within some tens of generations, 500 and 1000 cities within a few
// hundred. A generation of 64 tours takes about 0.3 ms at 100 cities,
// 1 ms at 500 and 1.6 ms at 1000 on one core (BenchmarkGeneration).
//
// # Migration (Fenech's interbreeding through a global variable)
//
// When migration is on (islands > 1 and migrants > 0), after every
// migrate_every generations (not after the last) island i
//
//  1. stores its `migrants` best tours in the job-global variable
//     "tspga/best/<i>" (Store: the islands never contend for a key), then
//  2. loads the variables of its sources (topology), skipping any not
//     stored yet or not readable, and
//  3. takes in up to `migrants` of those tours, best first, each that it
//     does not already have and that is shorter than its current worst
//     tour, which it replaces.
//
// Islands run at their own pace and never wait for each other: an island
// takes whatever its sources last published. Message passing (Send/Recv)
// is not used; a ring of mailboxes would make a slow island's inbox grow
// and would need every task's ID, while a variable always holds the
// latest tours.
//
// The variable's value is binary, big-endian:
//
//	offset  size    field
//	0       4       magic "TSPM"
//	4       4       island
//	8       4       generation
//	12      2       cities n
//	14      2       tour count k (at most what fits sdk.MaxGlobalSize)
//	16      k*2n    tours, each n uint16 city indices
//
// A host without job-global variables (sdk.ErrUnsupported: an older p2pc,
// sdktest.Run) switches migration off: each island then evolves alone.
// Other failed exchanges are skipped and tried again K generations later.
//
// # Checkpoints
//
// Every checkpoint_every seconds, at a generation boundary (after that
// generation's migration), the island checkpoints its whole state; on
// start it calls Resume and, if the host holds a checkpoint of the same
// run, continues from its generation, so a task restarted on another
// peer loses at most checkpoint_every seconds of work. The state is
// binary, big-endian:
//
//	offset  size    field
//	0       8       magic "TSPGACP1"
//	8       32      fingerprint: SHA-256 of every param but
//	                checkpoint_every and of the cities' coordinates
//	40      4       generation
//	44      8       RNG state (SplitMix64: one uint64)
//	52      8       immigrants accepted so far
//	60      4       cities n
//	64      4       population size P
//	68      4       history entries h
//	72      P*2n    the population, best first, each n uint16 cities
//	...     8h      history: best length at the recorded generations
//
// A checkpoint whose fingerprint or contents do not match is ignored (the
// progress note says why) and the island starts afresh. A host without
// checkpoints switches them off; other failed checkpoints are retried at
// the next interval.
//
// An island's job-global operations depend only on its generation count
// and on what its earlier Loads returned, so it is deterministic given
// its Host results, as p2pc's coordinator expects: an island started
// again (from its checkpoint or from scratch) replays the coordinator's
// log of its operations, gets the immigrants the lost attempt got, and
// publishes nothing twice; past the end of the log it migrates live.
//
// # Output
//
// The task's inline data ("data") is JSON: instance, cities, island,
// islands, seed, best_length, tour (0-based city indices in the order of
// the instance's cities, starting at city 0, turned so that the second
// city is smaller than the last), generations, population, migrants_in
// (immigrants accepted), history_every and history: the best length at
// generations 0, history_every, 2*history_every, ... and the last
// (history_every is 1 up to 2000 generations, and keeps about 2000
// entries beyond).
//
// Progress is generation/generations, with the best length in the note;
// each progress report comes with a partial result, JSON {island,
// generation, generations, best_length}; both at most every 250 ms.
//
// The reduce step writes best.json (instance, cities, length, tour,
// island and task of the shortest tour, the lowest island winning a tie;
// optimum and gap_percent if the job params give the optimum; and each
// island's best_length and migrants_in) and convergence.svg (best length
// against generation, one line per island, a dashed line at the
// optimum), both byte-identical for the same task outputs.
//
// # Determinism
//
// Everything an island computes is a function of its params and
// instance: the RNG is SplitMix64 implemented here (not math/rand, whose
// algorithms a Go release may change), distances and lengths are
// integers (the distance's float products are rounded explicitly, so no
// fused multiply-add can change them on any GOARCH), populations are
// sorted by a total order, and no time, map order or goroutine enters the
// result. So an island without migration (islands 1, migrants 0, or a
// host without globals) gives byte-identical output on every run and
// machine, and Describe declares the plugin Portable; a run resumed from
// a checkpoint ends with exactly the bytes of one never interrupted.
// Wall-clock time only decides when to checkpoint and report, never what
// is computed.
//
// With migration, which tours an island takes in depends on how far its
// sources have got, which depends on the peers' speeds: output is then not
// reproducible, and redundant execution (verify replicas > 1) would see
// replicas disagree. Run migrating jobs without replicas.
package main
