// Package sandbox confines task plugin processes on Linux with the
// kernel's own mechanisms, so that a task gets only what it needs.
//
// # How a process is confined
//
// The plugin host forks each plugin from a goroutine locked to a fresh OS
// thread that it never unlocks. ConfineThread confines that thread, and
// the plugin forked from it inherits everything:
//
//   - a private network namespace unless the policy asks for the
//     network (needs CAP_SYS_ADMIN, so a peer run as root): one per
//     Confinement, made on its first start (the first of a process takes
//     the one Probe made) and joined with setns by each starting thread;
//     the plugin host keeps one Confinement per pool, so the processes
//     of one job on one peer share an empty namespace whose loopback
//     stays down (see docs/sandbox.md: no weaker than one each);
//   - no_new_privs, then a Landlock domain (landlock_restrict_self on
//     the thread only): read and execute beneath SystemReadOnly and
//     Policy.ReadOnly, read and write of SystemDevices, every file right
//     beneath Policy.ReadWrite, nothing else; TCP bind and connect
//     refused (ABI >= 4) unless Policy.Network; signals to and abstract
//     unix sockets of processes outside the domain refused (ABI >= 6);
//   - last, a seccomp filter (seccomp_linux.go, amd64 and arm64) that
//     answers EPERM to the system calls no task needs: ptrace and
//     process_vm_readv/writev, mount and pivot_root, kexec, module
//     loading, bpf, perf_event_open, userfaultfd, io_uring, keyrings,
//     file handles, reboot, swap, acct, quotas, clock setting, I/O ports,
//     unshare and setns, clone with namespace flags, personality flags
//     other than the plain ones. clone3 answers ENOSYS (a filter cannot
//     read its flags; C libraries fall back to clone), unless
//     Policy.Clone3: a host that forks the plugin with clone3
//     (SysProcAttr.UseCgroupFD, cgroup v2) must set it, since the fork
//     itself runs under the filter. System calls of another ABI (32-bit
//     x86, x32) are refused whole.
//
// Floor then sets the process's resource limits: no core files, at most
// MaxOpenFiles open files, files of at most Limits.FileSize bytes.
//
// Warm makes ahead what a process's first confined start needs (Probe's
// answers, the cgroup tree below), for a caller that can overlap it with
// its own start (p2pc run).
//
// Confining one thread, not the process, keeps the host itself free: the
// Go runtime starts new threads from a clean template thread whenever the
// thread asking for one is locked (runtime.LockOSThread), and a locked
// goroutine that returns takes its thread with it, so the confined thread
// never runs anything else. go-landlock's own API confines every thread
// of the calling process (it is made for a program that confines itself),
// and its raw layer pulls in libcap's psx (cgo, pthread_create wrapped),
// so this package speaks to the kernel through golang.org/x/sys/unix.
//
// Landlock is best effort: ABI versions the kernel lacks lose their
// rights (an ABI 1 kernel still confines reads and writes, but not
// truncation, TCP or signals), and a kernel without Landlock runs tasks
// with the files of the user — Probe says so, and p2pc join prints it.
//
// # Resources and lifetime: cgroups
//
// Each p2pc process makes one cgroup tree (p2pc-PID-RANDOM, beneath its
// own cgroup in each v1 hierarchy or in the v2 one; Cgroups says which)
// and NewCgroup makes a child of it per plugin process, with Limits
// (memory, processes). StartConfined starts the plugin already in its
// cgroup: on v2 by CLONE_INTO_CGROUP, on v1 by moving the starting
// thread (already a thread of its own, see above) into the cgroup for
// the fork and back after it (the thread writes "0", itself, to the
// tasks files: a move by thread ID takes a lock whose first taking in a
// while waits for an RCU grace period); the cgroup files are opened
// before Landlock confines the thread. Cgroup.KillOthers ends what a plugin call's
// tasks left running in a warm process's cgroup (after the call), Cgroup.Kill the whole group
// (cgroup.kill, or freeze + SIGKILL), Cgroup.Exceeded says whether the
// kernel killed for memory (oom_kill) or refused a fork (pids max).
// SetShare caps the whole tree (p2pc join --cpus, --memory), Freeze
// freezes every plugin's cgroup (--pause-when-busy; each on its own: a
// cgroup beneath a frozen parent could not be thawed to die; FrozenTime
// adds up how long, for the tasks' timeouts), CPUUsage says what the
// tree used.
//
// A tree is owned by a lock file in /run/p2pc/cgroups (package dirlock):
// the next p2pc removes the trees of processes that died without
// removing theirs. Without cgroups (not root, no memory or pids
// hierarchy, P2PC_NO_CGROUPS=1) NewCgroup fails, the plugin host warns,
// and tasks get Rlimits (RLIMIT_NPROC relative to the task user's count,
// RLIMIT_AS, RLIMIT_FSIZE) on top of Floor's; TaskLimits says which
// apply. See docs/sandbox.md.
//
// P2PC_SANDBOX=off switches everything off for one process, for the
// figure of what confinement costs (p2pc prints a loud warning); Probe
// then asks the kernel nothing (it would make a network namespace).
//
// # Task user
//
// A host run as root runs tasks as an unprivileged account (TaskUser,
// Policy.User, applied with SysProcAttr.Credential in the fork). Grant
// opens the policy's paths to that account alone with POSIX ACL entries
// (search only on the folders above them); Own hands a work folder the
// host made to it. Floor then sets the limits of the task user's process
// from a thread that has taken its IDs (a root without CAP_SYS_RESOURCE
// may not change another user's limits).
//
// # What it does not do (yet)
//
// Inputs, work folders and the private folders of the plugin's pool are
// named by the caller; a warm process serves tasks in every slot folder
// of its pool, so tasks of one pool (one job on one peer, see package
// node) are not confined from each other. docs/sandbox.md is the user's
// account of all of it.
package sandbox
