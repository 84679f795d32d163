// Command vcprobe is a task plugin that exercises the job's "virtual
// computer": job-global variables, messages between tasks, checkpoints and
// partial results. The tests use it to check those features across real
// peers; it is also a compact example of the Host calls.
//
// Params (all optional; a task does each part that its params ask for):
//
//	increments  int     sdk.Update the global "counter" (+1) this many times;
//	                    the output lists the value each increment produced
//	checkpoint_every int  checkpoint the increments done so far every this
//	                    many increments, and resume from the latest
//	increment_ms int    wait this long before each increment
//	ring        int     the number of tasks in a ring: send "from <task>" to
//	                    task (index+1) % ring, where index is this task's
//	                    index param, and wait for one message
//	index       int     this task's place in the ring (tasks are named by
//	                    their zero-padded index, as spec generators do)
//	steps       int     work in steps of step_ms milliseconds, saving a
//	                    checkpoint after each; a resumed task starts at the
//	                    step its checkpoint saved
//	step_ms     int     the length of a step (default 100)
//	partials    bool    emit a partial result after each step
//
// The output is JSON: {"increments":[...], "received":"...",
// "resumed_at": n, "steps": n}.
package main
