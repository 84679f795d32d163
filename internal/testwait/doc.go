// Package testwait is for tests and the harness only: it waits, with a
// bound, for a condition (For, Until) and checks that a test binary leaves
// no goroutine running (Main). No production package imports it
// (internal/archtest).
package testwait
