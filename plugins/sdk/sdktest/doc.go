// Package sdktest runs p2pc task plugins in-process, for their authors'
// tests.
//
// Run and Reduce call a plugin's Task or Reducer directly, with a private
// temporary work dir and a recording Host, and read the outputs back:
//
//	out, err := sdktest.Run(ctx, myTask{}, map[string]any{"band": 3})
//	if err != nil { ... }
//	defer out.Cleanup()
//	png := out.Files["image.png"]
//
// They mirror what the SDK and the node do around a call: a panic in task
// code becomes an error, output files must be regular files inside the
// work dir, and inline Data shows up as the file sdk.DataFile. Unlike a real
// host they keep the task's own error value (over the wire only its
// message survives, as an *sdk.TaskError).
//
// Verify runs a plugin's sdk.Verifier on an Outcome, as the coordinator
// checks an output.
//
// Conformance is the suite every plugin should pass: it runs each case
// twice in fresh work dirs and checks that the outputs exist, stay inside
// the work dir and are byte-identical across runs (redundant execution
// votes on them), that progress stays within [0, 1] and never goes back,
// that the plugin's own Verify (if any) accepts them, and that a
// cancelled context makes the task return promptly.
//
// The Host that Run, Reduce and Conformance give a task records progress
// and partial results and answers the job-wide calls (Send, Recv, Load,
// Store, CompareAndSwap, Checkpoint, Resume) with sdk.ErrUnsupported.
// Tasks that use them are tested with a Job: an in-memory coordinator
// whose RunTasks runs several tasks at once, sharing mailboxes, job-global
// variables and checkpoints, and whose Host starts a task again as after
// the death of its peer.
//
// Nothing here starts a process: a plugin that calls os.Exit or must be
// killed is tested through a real host.
package sdktest
