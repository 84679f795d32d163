// Package harness drives real p2pc processes: it builds the binary, starts
// processes with their output captured, waits for them with deadlines,
// stops them (the whole process group, also when the test or benchmark
// dies), and scans their logs for panics and data races.
//
// Labs (lab.go) are small LANs on one machine for benchmarks and
// end-to-end tests: network namespaces joined by a bridge (or one
// namespace on loopback), a `p2pc join` per peer under a CFS CPU quota
// (cgroup v1 or v2), and `p2pc run` in a namespace of its own. Everything
// a lab makes is named LabPrefix+"<owner pid>-..." (LabName) and removed
// when it closes; a new lab removes what crashed runs left behind, judged
// by the owner's lock in LabLockDir, never by its pid (labowner.go). Labs
// need root; LabAvailable says whether this process can build them.
//
// Faults for the chaos suite (labfault.go, package harness/chaos): a
// peer's link cut at the bridge (SetLink), a peer restarted at its
// address (RestartPeer), a run started without waiting (StartSubmit), a
// tmpfs in a private mount namespace under a peer's data folder
// (PeerSpec.DiskBytes) or a submitter's output (Tmpfs), an open-file
// limit (PeerSpec.NoFile), idle connections from a lab namespace
// (Dial), and the check that nothing a lab started
// outlives it (Procs, Leftovers).
//
// Private network namespaces for tests that multicast (netns.go):
// MainInNetns re-executes a test binary inside one.
//
// End-to-end tests and `p2pc bench` (package harness/bench) use it, so
// that what is tested and measured is the program users run, on real
// sockets, never a mock.
package harness
