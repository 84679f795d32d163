// Package sandbox confines task plugin processes on Linux with the
// kernel's own mechanisms, so that a task gets only what it needs.
//
// ConfineThread confines the calling OS thread: a private network
// namespace unless the policy asks for the network, no_new_privs, a
// Landlock domain and last a seccomp deny list. The plugin host forks
// each plugin from such a thread, which it never unlocks, so the plugin
// inherits all of it and the host itself stays free. Floor then sets the
// process's resource limits.
//
// Each p2pc process owns one cgroup tree, held by a lock file in
// /run/p2pc/cgroups (root) or /tmp/p2pc-cgroups-UID (another user: a
// folder of its own, closed to others; package dirlock), and NewCgroup makes a child of it
// per plugin process. StartConfined starts a plugin already in its
// cgroup. SetShare caps the whole tree, Freeze freezes every plugin's
// cgroup, and FrozenTime adds up the time frozen for the tasks' timeouts.
// Without cgroups, NewCgroup fails and tasks get Rlimits instead.
//
// A host run as root runs tasks as an unprivileged task user; Grant and
// Own open the policy's paths to that user alone.
//
// Every mechanism is best effort: Probe says what this kernel gives.
// P2PC_SANDBOX=off switches all of it off for one process. Tasks of one
// plugin pool are not confined from each other. docs/sandbox.md is the
// user's account, docs/design/sandbox.md the design.
package sandbox
