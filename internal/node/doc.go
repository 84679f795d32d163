// Package node is a p2pc peer: the process behind `p2pc join` (and the
// submitter's own node inside `p2pc run`). It serves the Peer protocol
// (internal/peerpb) and the Blocks protocol (internal/transfer) on one
// gRPC server, keeps its block store, announces itself and keeps the
// membership (package discovery), and runs tasks for the coordinators
// that enrol it.
//
// Work sessions. A job's coordinator opens a Work stream and says Hello:
// the job, the plugin and inputs as block file IDs, the task timeout. The
// node refuses a protocol version it does not speak or a plugin built for
// another OS/architecture; otherwise it fetches the plugin and the inputs
// (from the coordinator and any other holder; a block that rotted in its
// store is quarantined and fetched again, once), checks the plugin's
// SHA-256, and starts asking for leases with Pull credits. Each lease runs
// in a warm plugin process (one pool per job and plugin digest, up to as
// many processes as slots, one started as soon as the plugin is local, more
// as calls wait for them (pluginhost.Pool), confined to that job's inputs and work folder and
// closed when the job's last session ends: a process serves one job
// only) through package taskrun, the same path as the submitter's own
// slots (staging, digest, timeout, outcome); the result goes back with the output's digest and its files,
// inline when small, else as blocks the coordinator fetches. Leases that
// arrive together come in one Leases message, results ready together
// leave in one Results message. A credit is answered with a
// batch: one lease, or, for tiny tasks, several (Lease.batch, sized by the
// coordinator) that the slot runs through one plugin call
// (taskrun.RunBatch), each with its own outcome and result, sent as soon
// as its task ends; the node's window counts batches, not leases. Each job has a folder of its own,
// DATA/work/<pid>-*/<job>-<n> (the node owns DATA/work/<pid>-* through a
// lock held in it, and removes those of dead nodes, see internal/dirlock):
// its inputs are a private copy in job/inputs (mode 0444), and each slot
// that runs its tasks has a work folder in work/slot<N>, emptied after
// every task and reused: a task still starts in an empty private folder,
// without the directory operations a fresh folder per task would cost.
//
// Fair sharing. The node's slots are shared between the sessions of all
// coordinators: slot runners take leases from the sessions in round-robin
// order, and each session may hold at most its fair share of the slots
// plus a small prefetch window (leased but not started), so a busy peer is
// never flooded and a second submitter is served at once.
//
// Volunteer controls (volunteer.go). The node refuses a job whose
// resources (os, arch, memory per task, cpus) do not fit, saying why;
// gives each task its memory (the job's, else --memory per slot) and disk
// share (--disk per slot); caps all tasks together through its cgroup
// tree (--cpus, --memory); and with --pause-when-busy samples /proc/stat
// each second: when other programs than p2pc and its tasks keep the CPU
// above the threshold for BusyFor it freezes the plugins' cgroups, grants
// no credits and starts no queued lease, and thaws when the machine is
// quiet for as long. Its own streams are not frozen: the coordinator sees a slow
// peer. Frozen time does not count against a task's timeout; a lease that
// was frozen and nears the coordinator's backstop (timeout +
// peerpb.LeaseGrace) is given back as canceled (no strike).
//
// Hand-over (keep.go). When a session breaks while the node lives (the
// coordinator was killed or cut off), its unstarted leases are dropped, its
// running tasks finish (the lease contexts hang off the node's life, not
// the stream's), and their successful results, with those the session
// sent and the coordinator did not acknowledge (Acks: its job database
// holds them; a coordinator without acks: those of the last 10 s), go to
// the node's keeper for
// Config.KeepResults, under the job ID and run of the session's Hello. A
// later session of the same job and run gets them as Handovers right after
// Welcome, before the first Pull, and again in every later session until
// they expire or the coordinator acknowledges them. The tasks the lost
// sessions still run (the keeper's orphans) are named in Welcome.running,
// and each is handed over, whatever its outcome, when it ends (watch): the
// coordinator leases them to nobody meanwhile. A new session of a run
// first ends the run's older sessions still open here (join), so that
// their tasks are orphans before it takes stock. End (the job is over)
// drops the run's results and stops what still runs of it. The keeper
// bounds the inline data it holds; file outputs are blocks in the store,
// pinned with the job's.
//
// Shutdown. On SIGINT/SIGTERM the node stops asking for work, hands back
// the leases it has not started (the coordinator requeues them at once),
// lets running tasks finish for a grace period, then leaves the
// membership. On SIGKILL the coordinator sees the stream break (or the
// membership declare the node dead) and requeues its leases; nothing the
// node wrote can be half-written (see package blocks).
// Lock order: session.mu, then keeper.mu; sched.mu, Node.mu, the swarm's and the presence's are leaves.
package node
