// Package swarmjobs keeps the jobs handed to the swarm (`p2pc run
// --detach`): a member owns such a job and runs its coordinator through a
// Runner the caller gives (package job, wired in cmd/p2pc), other members
// hold copies of its bundle (spec, plugin, inputs) and of its output
// folder, and any member answers who asks for the jobs it knows.
// While it runs, the owner copies the job's journal to its successors,
// which take it over when the owner dies. Service
// is the member's side of the Jobs protocol (swarmjobspb), Client the
// side of the commands (jobs, attach, fetch, cancel, run --detach);
// Client.Follow follows a job across a takeover (follow.go).
//
// Invariants:
//
//   - A job's folder is DATA/jobs/ID: record.json (written through a
//     temporary file and a rename), bundle/ and, on the owner while it
//     runs and on holders once it ended, out/. Every copy is received
//     into a temporary folder and renamed into place whole.
//   - The owner's record is the truth; records of one job compare by
//     epoch first (Newer). A job's successors are its holders in the
//     record's order; the first one not declared dead takes a job whose
//     owner is gone over at epoch + 1 (takeover.go), from the journal
//     the owner copied to it (kind "state"). A member refuses copies of a
//     lower epoch and steps down from a job it owns when it meets a higher
//     one. An owner whose holders are all declared dead gives the bundle
//     to other live members, which become its holders (holders.go).
//   - Only the record's submitter cancels or says it fetched the output;
//     only the record's owner sends copies, but that a member the record
//     lists in results_on sends copies of an ended job's output folder
//     and its record (all checked against the caller's TLS node ID).
//   - Until the submitter fetched it, an ended job's output is kept on
//     1+Copies members: the keeper (the first live holder in the job's
//     rank) copies it again when a holder was gone for LostAfter. After
//     the fetch, a member drops its copy only once a holder ranked above
//     it confirmed it holds the output, so one copy stays.
//   - With Config.Disk, a copy that does not fit beside what the member
//     keeps is refused (ResourceExhausted); nothing is dropped for room.
//   - An owned job that was running when its member stopped resumes when
//     the member starts again (its output folder resumes as `p2pc run`'s).
//
// Lock order: Service.stateMu, then Service.mu. docs/protocol.md describes the
// protocol; docs/design/swarmjobs.md the choices.
package swarmjobs
