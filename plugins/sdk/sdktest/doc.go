// Package sdktest runs p2pc task plugins in-process, for their authors'
// tests. Nothing here starts a process.
//
// Run and Reduce call a plugin's Task or Reducer directly, with a private
// temporary work dir and a recording Host, and read the outputs back.
// They apply the host's rules: a panic becomes an error, output files
// must be regular files inside the work dir, and inline Data shows up as
// the file sdk.DataFile. Verify runs a plugin's sdk.Verifier on an
// Outcome. Conformance is the suite every plugin should pass: each case
// runs twice and must give byte-identical outputs.
//
// The Host of Run answers the job-wide calls with sdk.ErrUnsupported.
// Tasks that use them are tested with a Job, an in-memory coordinator
// that runs several tasks at once and can start a task again as after
// its peer's death. docs/plugin-sdk.md, "Testing with sdktest", shows how.
package sdktest
