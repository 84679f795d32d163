//go:build !linux

package blocks

import "os"

// On systems other than Linux no CRC32C is recorded (ReadBlock falls back
// to SHA-256) and write-back is not started early.

func setCRC(*os.File, uint32) error { return errNoXattr }

func getCRC(*os.File) (uint32, bool) { return 0, false }

func startWriteback(*os.File) {}

// StartWriteback does nothing on this system.
func StartWriteback(*os.File, int64, int64) {}

func hasData(*os.File, int64, int64) bool { return true }

// sameDevice says no: LinkFile is not attempted on this system.
func sameDevice(string, string) bool { return false }

const dioAlign = 4096

func openDirect(*os.Root, string, string) *os.File { return nil }

func preallocate(*os.File, int64) bool { return false }
