// Package dirlock owns folders through a held lock, never through a
// guessed PID.
//
// A folder that anyone may sweep (a plugin pool's private folder, a node's
// work folder, a socket folder in /tmp) holds a lock file, FileName, on
// which its owner keeps an exclusive flock(2) for as long as it uses the
// folder. The kernel drops the lock when the owner's last descriptor
// closes, so an owner that dies (even with SIGKILL) leaves a folder that
// the next sweep can lock, and only then removes. A process in another PID
// namespace, or one that reuses the owner's PID, cannot make a live
// folder look dead: kill(pid, 0) could (STYLE.md habit 11).
//
// Make creates an owned folder atomically: it makes the folder under a
// hidden staging name ("." + prefix + random + ".staging"), creates and
// locks the lock file in it, and only then renames it to prefix + random.
// So no folder with a final name ever exists without a held lock, and
// Sweep never sees a half-made one under that name.
//
// Sweep(parent, prefix) removes the folders in parent named prefix* (and
// the staging folders of that prefix) whose lock it can take: it takes the
// lock, checks that the lock file is still the one at the path, removes
// the folder, then lets the lock go. A folder whose lock is held is left
// alone. A folder without a lock file (made by an older p2pc, or a staging
// folder whose maker died before it locked) is removed only when it has
// not changed for LegacyAge.
//
// Acquire locks one file at a fixed path without waiting, and writes the
// owner (pid, host, start time) into it; a second Acquire fails with a
// *HeldError naming that owner. `p2pc run` uses it for its output folder.
// Readers never need the lock.
//
// The lock file's content is informational, three lines:
//
//	pid 12345
//	host worker-1
//	start 2026-11-23T23:11:24.123456789Z
//
// Lock descriptors are opened close-on-exec (os.OpenFile always is), so
// plugin processes never inherit a lock. Where flock is unavailable
// (!unix) locks always succeed and Sweep removes nothing.
package dirlock
