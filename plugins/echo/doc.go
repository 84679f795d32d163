// Command echo is the p2pc test and benchmark plugin: a task that returns
// its params. Switches in the params make it slow, fail, panic, crash or
// produce output of a given size, for tests of the host and for load and
// latency benchmarks.
//
// Without output_bytes the data is the params exactly as received.
// Echo is portable: outputs are the same on every architecture.
// docs/plugins/echo.md lists the params.
package main
