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
// They mirror what the plugin side of the SDK does around a call: a panic
// in task code becomes an error, output paths must be local to the work
// dir, and inline Data shows up as the file sdk.DataFile. Unlike a real
// host they keep the task's own error value (over the wire only its
// message survives, as an *sdk.TaskError).
//
// Conformance is the suite every plugin should pass: it runs each case
// twice in fresh work dirs and checks that the outputs exist, stay inside
// the work dir and are byte-identical across runs (redundant execution
// votes on them), that progress stays within [0, 1] and never goes back,
// and that a cancelled context makes the task return promptly.
//
// Nothing here starts a process: a plugin that calls os.Exit or must be
// killed is tested through a real host.
package sdktest
