package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// Faults a lab can inject, for the chaos suite (package harness/chaos):
// a peer's link cut and healed, a peer restarted after a kill, a small
// disk (tmpfs) under a peer's data folder or a submitter's output folder,
// and the checks that nothing the lab started is left running.

// SetLink cuts (up false) or restores a peer's link to the lab's bridge,
// at the hub end of its veth pair: nothing reaches the peer and nothing
// leaves it, and its own interface and routes stay as they were. Bridge
// mode only.
func (l *Lab) SetLink(ctx context.Context, p *LabPeer, up bool) error {
	if p.link == "" {
		return fmt.Errorf("set link of %s: a %s lab has no link per peer", p.Name, l.cfg.Mode)
	}
	if err := l.net.setLink(ctx, l.name+"-hub", p.link, up); err != nil {
		return fmt.Errorf("set link of %s: %w", p.Name, err)
	}
	return nil
}

// RestartPeer starts a peer again whose process ended (killed, or
// stopped with Stop), in the same namespace, data folder and gRPC
// address, and waits until it listens.
func (l *Lab) RestartPeer(ctx context.Context, p *LabPeer) error {
	if p.Proc != nil {
		select {
		case <-p.Proc.Done():
		default:
			return fmt.Errorf("restart peer %s: still running", p.Name)
		}
		if err := p.Proc.CheckLogs(); err != nil {
			return fmt.Errorf("restart peer %s: %w", p.Name, err)
		}
	}
	var extra []string
	if first := l.peers[0]; l.cfg.JoinFirst && p != first && first.Addr != "" {
		extra = []string{"--join", first.Addr}
	}
	if err := l.startPeer(p, extra); err != nil {
		return fmt.Errorf("restart peer %s: %w", p.Name, err)
	}
	wctx, cancel := context.WithTimeout(ctx, l.cfg.StartTimeout)
	defer cancel()
	if _, err := p.Proc.WaitOutput(wctx, listenLineRe); err != nil {
		return fmt.Errorf("restart peer %s: %w", p.Name, err)
	}
	return nil
}

// Procs returns every process the lab started (peers, restarted peers,
// submitters), in order.
func (l *Lab) Procs() []*Proc {
	l.procMu.Lock()
	defer l.procMu.Unlock()
	return slices.Clone(l.procs)
}

// Leftovers returns what still ran in the lab's namespaces once Close had
// stopped every process it started (waiting up to 2 s for them to go):
// processes that escaped their process group, such as a task's or a
// plugin's. Close then killed them. Empty before Close.
func (l *Lab) Leftovers() []string {
	l.procMu.Lock()
	defer l.procMu.Unlock()
	return slices.Clone(l.leftovers)
}

// Mount is a tmpfs mounted at one path in a mount namespace of its own,
// held by a small process: the processes run through Wrap see it, the
// rest of the machine does not. Its files are read through Path. Close
// of the lab removes it.
type Mount struct {
	Dir    string
	holder *Proc
}

var readyRe = regexp.MustCompile(`(?m)^ready$`)

// Tmpfs mounts a tmpfs of size bytes at dir (made if missing) in a new
// mount namespace.
func (l *Lab) Tmpfs(dir string, size int64) (*Mount, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tmpfs at %s: %w", dir, err)
	}
	script := `mount -t tmpfs -o size="$1" p2pc-lab "$0" && echo ready && exec sleep 86400`
	holder, err := Start("unshare", []string{"--mount", "--propagation", "private", "/bin/sh", "-c", script, dir, strconv.FormatInt(size, 10)},
		Options{Name: "tmpfs " + filepath.Base(dir)})
	if err != nil {
		return nil, fmt.Errorf("tmpfs at %s: %w", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := holder.WaitOutput(ctx, readyRe); err != nil {
		holder.Kill()
		return nil, fmt.Errorf("tmpfs at %s: %w", dir, err)
	}
	m := &Mount{Dir: dir, holder: holder}
	l.procMu.Lock()
	l.mounts = append(l.mounts, m)
	l.procMu.Unlock()
	return m, nil
}

// Wrap prefixes argv so that it runs in the mount's namespace.
func (m *Mount) Wrap(argv []string) []string {
	return append([]string{"nsenter", "-t", strconv.Itoa(m.holder.Pid()), "-m", "--"}, argv...)
}

// Path is where path (an absolute path as the processes in the mount's
// namespace see it) can be read from outside.
func (m *Mount) Path(path string) string {
	return filepath.Join("/proc", strconv.Itoa(m.holder.Pid()), "root", path)
}

// Free makes room on the mount: it deletes the file at name (relative to
// Dir), e.g. a filler written to make the disk full.
func (m *Mount) Free(name string) error {
	if err := os.Remove(m.Path(filepath.Join(m.Dir, name))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("free %s: %w", name, err)
	}
	return nil
}

func (m *Mount) close() { m.holder.Kill() }

// Resize changes the tmpfs's size (bytes): a full disk made roomy again.
func (m *Mount) Resize(ctx context.Context, size int64) error {
	err := runCmd(ctx, "nsenter", "-t", strconv.Itoa(m.holder.Pid()), "-m", "--",
		"mount", "-o", "remount,size="+strconv.FormatInt(size, 10), m.Dir)
	if err != nil {
		return fmt.Errorf("resize tmpfs at %s: %w", m.Dir, err)
	}
	return nil
}

// Dial opens up to n TCP connections to addr from the namespace of peer
// from (nil: the submitter's) and leaves them idle: a flood of
// connections that never speak. It returns the connections it could open
// within ctx (close them to end the flood).
func (l *Lab) Dial(ctx context.Context, from *LabPeer, addr string, n int) ([]net.Conn, error) {
	ns := l.subNS
	if from != nil {
		ns = from.Netns
	}
	return dialInNetns(ctx, ns, addr, n)
}
