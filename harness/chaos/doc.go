// Package chaos is p2pc's chaos suite: one scenario per fault, each
// breaking a real swarm on purpose (real `p2pc join` and `p2pc run`
// processes in private network namespaces on a lab bridge, see package
// harness) and asserting that the job ends, loudly and correctly.
package chaos
