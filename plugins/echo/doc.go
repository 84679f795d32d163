// Command echo is the p2pc test and benchmark plugin: a task that returns
// its params. Switches in the params make it slow, fail, crash or produce
// output of a given size, for tests of the host (timeouts, retries,
// crashes) and for load and latency benchmarks.
//
// Params (all optional; unknown keys are ignored):
//
//	sleep_ms        int   sleep this long before answering, honouring
//	                      cancellation
//	partials        int   emit this many partial results, spread over the
//	                      sleep; partial i (from 1) is {"partial":i,"of":n}
//	fail            bool  return a task error ("echo: failing as asked")
//	panic           bool  panic in Run (the SDK recovers and returns the
//	                      panic with its stack as a task error)
//	crash           bool  exit the plugin process with status 3 (a crash)
//	crash_attempts  int   crash only while the attempt number (0 on the
//	                      first try) is below this, so a retry succeeds;
//	                      setting it implies crash
//	output_bytes    int   return this many pseudo-random bytes instead of
//	                      the params; the stream is seeded with the FNV-1a
//	                      hash of the params, so it is deterministic yet
//	                      differs between tasks with different params
//
// The switches act in this order: partials and sleep, panic, crash, fail,
// output. Without output_bytes the data is the params exactly as received
// (the JSON object bytes). Echo is portable: outputs are the same on
// every architecture.
package main
