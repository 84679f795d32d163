//go:build !linux

package sandbox

import "log/slog"

// Grant grants nothing outside Linux: tasks run as the host's user.
func Grant(Policy, *slog.Logger) error { return nil }

// Own does nothing outside Linux.
func Own(string, Policy) error { return nil }

// GrantTree grants nothing outside Linux.
func GrantTree(string, Policy) error { return nil }

// Reclaim does nothing outside Linux: tasks wrote as the host's user.
func Reclaim(string) error { return nil }

// Unreadable finds nothing outside Linux: tasks run as the host's user.
func Unreadable([]string, Policy) []string { return nil }
