// Package dirlock owns folders through a held lock, never through a
// guessed PID.
//
// An owned folder holds the lock file FileName, on which its owner keeps
// an exclusive flock(2) while it uses the folder. The kernel drops the
// lock when the owner dies, even by SIGKILL, so the next Sweep can take
// it and remove the folder. A process in another PID namespace, or one
// that reuses the owner's PID, cannot make a live folder look dead.
//
// Invariants: Make renames a folder to its final name only after its lock
// is held, so no folder with a final name exists without a held lock.
// Sweep removes only folders whose lock it takes, and folders without a
// lock file only after LegacyAge unchanged. Acquire locks one file without
// waiting; a second Acquire fails with a *HeldError naming the owner.
// Lock files are close-on-exec, so plugins never inherit a lock. Where
// flock is unavailable, locks always succeed and Sweep removes nothing.
package dirlock
