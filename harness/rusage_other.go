//go:build !linux

package harness

// MaxRSS is the most resident memory the process held, in bytes; this
// system's rusage is not read (see rusage_linux.go), so it is 0.
func (p *Proc) MaxRSS() int64 { return 0 }
