package main

import (
	"flag"
	"os"
	"strings"
	"sync"
	"testing"
)

// parallel marks a top-level test as one that runs beside the other
// parallel tests of the package (t.Parallel), after every serial test has
// ended. Call it first in a test whose processes and files are its own:
// peers on ports of their own (127.0.0.x:0), folders under t.TempDir()
// or the shared dataDir (whose users take locks of their own), no
// t.Setenv, no look at processes or CPU time beyond its own children,
// no mDNS. While any parallel test runs, P2PC_NO_MDNS=true is in the
// environment the tests' p2pc processes inherit, so that the swarms of
// tests that run at once never find each other by mDNS (they share one
// swarm secret); the serial tests, among them those of mDNS, run with
// the environment TestMain set. A test that needs mDNS, measures the
// machine's load or needs the machine quiet stays serial.
func parallel(t *testing.T) {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		// A subtest's t.Parallel waits for its parent only, not for the
		// package's serial tests.
		t.Fatalf("parallel(t) is for top-level tests; %s is a subtest", t.Name())
	}
	t.Parallel()
	parallelEnv.Lock()
	if parallelEnv.running == 0 {
		parallelEnv.was, parallelEnv.set = os.LookupEnv("P2PC_NO_MDNS")
		os.Setenv("P2PC_NO_MDNS", "true")
	}
	parallelEnv.running++
	parallelEnv.Unlock()
	t.Cleanup(func() {
		parallelEnv.Lock()
		defer parallelEnv.Unlock()
		if parallelEnv.running--; parallelEnv.running == 0 {
			// With -count=N the serial tests run again after this.
			if parallelEnv.set {
				os.Setenv("P2PC_NO_MDNS", parallelEnv.was)
			} else {
				os.Unsetenv("P2PC_NO_MDNS")
			}
		}
	})
}

// parallelEnv is the environment parallel sets while its tests run.
var parallelEnv struct {
	sync.Mutex
	running int // parallel tests running now
	was     string
	set     bool // P2PC_NO_MDNS was set before, to was
}

// defaultParallel is how many parallel tests run at once unless
// -test.parallel says otherwise: most of a parallel test's time is spent
// waiting on its processes (starts, leases, timeouts), so more than the
// number of cores.
const defaultParallel = "3"

// setParallel applies defaultParallel unless the command line set
// -test.parallel. Call it after flag.Parse.
func setParallel() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", defaultParallel)
	}
}
