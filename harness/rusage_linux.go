package harness

import "syscall"

// MaxRSS is the most resident memory the process held, in bytes (its
// own, not its children's); 0 until it has exited, or where the system
// does not say.
func (p *Proc) MaxRSS() int64 {
	select {
	case <-p.done:
	default:
		return 0
	}
	if st := p.cmd.ProcessState; st != nil {
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			return ru.Maxrss * 1024 // kilobytes on Linux
		}
	}
	return 0
}
