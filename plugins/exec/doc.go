// Command exec is the p2pc plugin for Preon's job model: a task is a
// command run over the job's input files, and its answer is the files it
// writes and, by default, what it prints.
//
// The command runs in the task's work dir with a scrubbed environment.
// Declared outputs must be regular files inside the work dir; a
// normalize filter may rewrite them before they are digested, and a
// reduce command may assemble all tasks' outputs. The command never
// outlives its task: on Linux a supervisor process kills its whole
// process group when the task ends or the plugin dies.
//
// Exec is not portable: what a command prints depends on the machine.
// docs/plugins/exec.md lists the params and the environment.
package main
