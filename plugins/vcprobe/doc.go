// Command vcprobe is a task plugin that exercises the job's "virtual
// computer": job-global variables, messages between tasks, checkpoints and
// partial results. The tests use it to check those features across real
// peers; it is also a compact example of the Host calls.
//
// docs/plugins/vcprobe.md lists the params and the output.
package main
