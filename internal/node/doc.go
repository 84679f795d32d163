// Package node is a p2pc peer: the process behind `p2pc join`, and the
// submitter's own node inside `p2pc run`. It serves the Peer protocol
// (internal/peerpb) and the Blocks protocol (internal/transfer) on one
// gRPC server, with the services its caller adds there (Services: the
// Jobs protocol of internal/swarmjobs), keeps its block store, keeps the membership (package
// discovery), and runs tasks for the coordinators that enrol it.
//
// A coordinator opens a Work session and says Hello. The node refuses a
// job its offer does not admit (spec.Resources.Admit), saying why; otherwise it fetches and checks the
// plugin and inputs, and asks for leases with credits. Each lease runs in
// a warm plugin process of the job's pool through package taskrun, the
// same path as the submitter's own slots.
//
// Invariants:
//
//   - A plugin process serves one job only, confined to that job's inputs
//     and work folder; each task starts in an empty work folder.
//   - The node's slots are shared fairly between the sessions of all
//     coordinators, so a busy peer is never flooded and a second
//     submitter is served at once.
//   - When a session breaks while the node lives, its running tasks
//     finish, and their results are kept and handed over to a later
//     session of the same job and run until the coordinator acknowledges
//     them or Config.KeepResults passes.
//   - A job whose resources ask for a GPU runs on the GPU slots only (one
//     per offered device, each with its own plugin pool bound to that
//     device), every other job on the CPU slots only.
//   - A job handed to the swarm is fenced by its owner's epoch
//     (Hello.epoch): the node refuses a coordinator of a lower epoch than
//     the highest it has seen for the job's run (fence.go).
//   - Time frozen by --pause-when-busy does not count against a task's
//     timeout.
//
// Ownership: the node owns DATA/work/<pid>-* through a lock held in it
// (package dirlock) and removes those of dead nodes.
//
// docs/protocol.md gives the conversation; docs/design/node.md describes
// sessions, fair sharing, the volunteer controls, hand-over and shutdown.
// Lock order: session.mu, then keeper.mu; sched.mu, Node.mu, epochFence.mu, the swarm's and the presence's are leaves.
package node
