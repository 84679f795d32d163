// Package taskrun is the one execution path of a task attempt, the same
// whether the slot is the submitter's own (package job) or a peer's
// (package node): it runs the attempt in a warm plugin of the job's pool
// with the job's timeout and the caller's Host, stages the result's files
// beside the work folder (WORK.out), digests the output (package
// outputs), and classifies the error into a report outcome
// (pluginhost.Classify).
//
// What differs between the two callers stays with them: the work folder
// (a fresh one per attempt on the submitter, a reused one per slot on a
// peer), the Host (the coordinator's shared state directly, or tunnelled
// to it over the Work stream), what becomes of the staged output (renamed
// into the output folder, or sent to the coordinator inline or as blocks),
// and the plugin's Verify, which the coordinator runs on every output
// wherever it was produced.
//
// RunBatch runs several attempts through as few plugin calls as it can
// (pluginhost.Pool.RunBatch: one streamed call where the plugin serves
// batches), in one work folder while the tasks leave it empty, with each
// attempt's outcome, staging and digest as Run gives them; the node's
// slots and the submitter's own use it for every lease, alone or batched.
//
// An output of inline data alone may skip the disk (Attempt.InlineMax):
// it is digested in memory, as outputs.DigestInline, and comes back in
// Output.Data. A peer uses this for small results it sends inline anyway.
package taskrun
