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
//	                                must exist as a regular file afterwards
//	env          map[string]string  extra environment variables
//	stdout       bool               capture stdout as the task's data
//	                                (default true; at most 64 MiB); false
//	                                sends it to /dev/null
//	copy_inputs  bool               copy the inputs into the work dir
//	                                instead of symlinking them (default
//	                                false)
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
// Inputs: every job input is symlinked into the work dir under its name
// (names may contain directories, which are made). The links point at
// the node's copy of the file, which the node shares with other tasks:
// inputs are read-only, and a command that writes to an input must run
// with copy_inputs: true. Inputs are not executable; run scripts through
// their interpreter (command: [sh, run.sh]).
//
// Failure: a non-zero exit is a task error that names the exit status and
// carries the last 4 KiB of stderr; so is a declared output that is
// missing (all of them are named) or not a regular file. On success the
// stderr tail is logged at debug level.
//
// Processes: the command gets its own process group, is sent SIGKILL if
// the plugin process dies (Linux: parent-death signal, which reaches the
// direct child only), and its whole group is killed when the task's
// context ends and again once the command has exited, so background
// processes do not outlive the task. Processes that leave the group
// (setsid) escape this until the sandbox gets a PID namespace.
//
// Exec is not portable: what a command prints depends on the machine.
package main
