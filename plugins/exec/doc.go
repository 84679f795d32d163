// Command exec is the p2pc plugin for Preon's job model: a task is a
// command run over the job's input files, and its answer is the files it
// writes (plus, by default, what it prints).
//
// Params:
//
//	command      []string           argv of the command (required). A name
//	                                without a slash is looked up in the
//	                                child's PATH; a relative path is taken
//	                                relative to the work dir.
//	shell        bool               run strings.Join(command, " ") with
//	                                /bin/sh -c instead (default false)
//	outputs      []string           files the command writes, relative to
//	                                the work dir (local paths only); each
//	                                must exist as a regular file afterwards;
//	                                $NAME and ${NAME} expand (below)
//	env          map[string]string  extra environment variables
//	stdout       bool               capture stdout as the task's data
//	                                (default true; at most 64 MiB); false
//	                                sends it to /dev/null
//	copy_inputs  bool               copy the inputs into the work dir
//	                                instead of symlinking them (default
//	                                false)
//	normalize    object             a filter run on outputs before their
//	                                digests are taken (below)
//	reduce       object             the job's reduce command (below; a
//	                                job-level param)
//
// normalize and reduce take command, shell, env and outputs as above.
//
// Normalize: real programs are seldom deterministic byte for byte (a
// renderer writes its render date into every image header), so with
// verify: {replicas: N} honest replicas would disagree and the task fail
// with "no quorum". normalize names a filter that reads one output on
// stdin and writes its canonical form on stdout; after the command
// succeeded it runs once per output, and its stdout replaces the output,
// which is what the digest covers, the vote compares and the job keeps.
// Its outputs param chooses the outputs (default: every declared output
// and, if captured, the stdout, named "data"); P2PC_OUTPUT names the one
// being filtered. Strip only what differs between honest runs:
//
//	normalize: {command: [sed, "/^# rendered /d"]}   # the date line of a PGM header
//
// A failing filter fails the task. It has no stdout param.
//
// Reduce: with reduce: true in the spec, the reduce command (params.reduce
// at the job level) runs once, after every task succeeded, in a work dir
// of its own. There tasks/<task ID>/<name> links to each output of each
// task (the captured stdout is tasks/<task ID>/data), P2PC_TASKS_DIR is
// that tasks folder, P2PC_TASK_IDS lists the task IDs in spec order
// separated by spaces, and P2PC_JOB_ID and P2PC_PARAMS (the job-level
// params) are set as for tasks (no P2PC_TASK_ID). Its declared outputs
// and captured stdout become the job's artifacts at the top of the output
// folder:
//
//	reduce:
//	  command: ["for t in $P2PC_TASK_IDS; do tail -n +4 $P2PC_TASKS_DIR/$t/band.pgm; done > rows"]
//	  shell: true
//	  outputs: [rows]
//
// examples/render.yaml puts both to work.
//
// The command runs in the task's work dir with a scrubbed environment:
//
//	PATH=/usr/local/bin:/usr/bin:/bin
//	HOME=<work dir>
//	TMPDIR=<work dir>/tmp            (created)
//	P2PC_JOB_ID, P2PC_TASK_ID
//	P2PC_PARAMS=<the task's params as JSON>
//	P2PC_PARAM_<NAME>=<value>        for every top-level string, number or
//	                                 bool param; NAME is the key in upper
//	                                 case, other characters than letters
//	                                 and digits becoming '_'
//
// then the env param, whose entries win. So a range of tasks over `band`
// can run `render --band $P2PC_PARAM_BAND > band.bin` with shell: true.
//
// Output names (outputs of the task, of normalize and of reduce) expand
// $NAME and ${NAME} with the variables of that environment, as the
// command sees them, before the command runs: with a param scene: hall,
// outputs: [$P2PC_PARAM_SCENE.png] names hall.png (normalize's outputs
// expand as the task's). A variable that is not set, or a $ that starts
// no name, fails the task (an output name never expands to less than was
// asked for), and so does a name that is no local path inside the work
// dir once expanded (a param ../x, or $HOME/x): outputs never leave the
// work dir. Apart from this, output names are taken as they are.
//
// Inputs: every job input is symlinked into the work dir under its name
// (names may contain directories, which are made). The links point at
// the node's copy of the file, shared with the job's other tasks (on a
// peer a private copy for the job, on the submitting machine it may be
// the user's own file): inputs are read-only, and a
// command that writes to an input must run with copy_inputs: true. Peers store inputs read-only and not
// executable (mode 0444): run scripts through their interpreter
// (command: [sh, run.sh]).
//
// Failure: a non-zero exit is a task error that names the exit status and
// carries the last 4 KiB of stderr; so is a declared output that is
// missing (all of them are named) or not a regular file. On success the
// stderr tail is logged at debug level.
//
// Processes: the command never outlives its task. On Linux it runs under
// a supervisor, a second copy of this binary (started through
// /proc/self/exe with P2PC_EXEC_SUPERVISOR=1 in its environment, which
// the command does not see), that leads a new process group holding the
// command and everything it starts:
//
//   - when the task's context ends, the plugin SIGKILLs the group;
//   - when the command exits, the plugin SIGKILLs what is left of the
//     group (background jobs), so the task returns at once;
//   - when the plugin process dies (the host kills a plugin whose task
//     overran its timeout, without waiting for the task to notice), the
//     kernel sends the supervisor SIGTERM (parent-death signal) and the
//     supervisor SIGKILLs the group. A parent-death signal on the command
//     alone would not reach its children.
//
// The supervisor reports the command's exit status or signal on a pipe,
// so errors name them exactly. It costs about 5 ms per command (a second
// Go process starting; BenchmarkTrue: 6.8 ms per task running /bin/true,
// 1.6 ms without the supervisor). Processes that leave the group (setsid,
// or a shell with job control) escape all this until the sandbox gets a
// PID namespace. On other systems commands run directly in their own
// process group, without the parent-death part.
//
// Exec is not portable: what a command prints depends on the machine.
package main
