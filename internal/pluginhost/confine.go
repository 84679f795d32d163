// How a pool's processes are confined.

package pluginhost

import (
	"strconv"

	plugin "github.com/hashicorp/go-plugin"
	"github.com/p2pc/p2pc/internal/sandbox"
)

// policy is the confinement of every process of the pool: Config.Sandbox
// plus the executable (read-only), Dir and the private folders
// (read-write). Called once the private folders exist.
func (pl *Pool) policy() sandbox.Policy {
	pl.mu.Lock()
	d := pl.dirs
	pl.mu.Unlock()
	p := pl.cfg.Sandbox
	p.ReadOnly = append(append([]string(nil), p.ReadOnly...), pl.cfg.Path)
	p.ReadWrite = append(append([]string(nil), p.ReadWrite...), d.home, d.tmp, d.work, d.sock)
	return p
}

// confinement is the pool's shared confinement (made before its first
// start: see start).
func (pl *Pool) confinement() *sandbox.Confinement {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.conf
}

// noteConfinement logs, once per pool, how its processes are confined:
// a Warn when files or the network are not (an old kernel, not Linux).
func (pl *Pool) noteConfinement(st sandbox.Status) {
	pl.confinedOnce.Do(func() {
		pl.mu.Lock()
		pl.confined = st
		pl.mu.Unlock()
		if st.Files() && (pl.cfg.Sandbox.Network || st.Network() != "none") {
			pl.hostLog.Debug("plugin processes confined", "sandbox", st.String(), "network", pl.cfg.Sandbox.Network)
			return
		}
		pl.hostLog.Warn("plugin processes are not fully confined on this machine", "sandbox", st.String())
	})
}

// Confinement says how the pool's processes are confined (known after
// the first start; before it, what this machine offers).
func (pl *Pool) Confinement() sandbox.Status {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.stats.starts.Load() == 0 && pl.confined == (sandbox.Status{}) {
		return sandbox.Probe()
	}
	return pl.confined
}

// socketConfig puts the plugins' sockets in the pool's socket folder;
// when they run as a task user, go-plugin hands each socket's folder to
// that user's group so the plugin can make its socket there.
func (pl *Pool) socketConfig() *plugin.UnixSocketConfig {
	c := &plugin.UnixSocketConfig{TempDir: pl.dirs.sock}
	if gid, ok := sandbox.TaskGroup(pl.cfg.Sandbox); ok {
		c.Group = strconv.FormatUint(uint64(gid), 10)
	}
	return c
}
