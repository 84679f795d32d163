// Package harness drives real p2pc processes for end-to-end tests,
// benchmarks and the chaos suite: it builds the binary, starts processes
// with their output captured, waits for them with deadlines, stops their
// whole process group, and scans their logs for panics and data races.
//
// Labs are small LANs on one machine: network namespaces joined by a
// bridge, or one namespace on loopback, with a `p2pc join` per peer under
// a CPU quota and `p2pc run` in a namespace of its own. Labs need root;
// LabAvailable says whether this process can build them. The faults of
// the chaos suite are in labfault.go. MainInNetns re-executes a test
// binary in a private network namespace, for tests that multicast;
// nothing in it reaches the Go module proxy, so a test binary whose tests
// run go commands calls FetchModules first.
//
// Ownership: everything a lab makes is named by LabName and removed when
// the lab closes. A new lab removes what crashed runs left behind, judged
// by the owner's lock in LabLockDir, never by a PID.
package harness
