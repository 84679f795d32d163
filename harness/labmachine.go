package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
)

// newSubmitterIP is the address of the machine NewSubmitter makes: not
// the first submitter's, so that no peer's neighbour cache still points
// at the machine that went.
const newSubmitterIP = "10.213.0.3"

// NewSubmitter stands for the submitter's machine going away for good
// and a new one taking its place: the submitter's network namespace is
// deleted (what still runs in it is killed, its link goes with it), and
// Submit, StartSubmit and Command run from then on in a fresh namespace
// on the bridge at another address. The submitter's data folder is the
// caller's to remove. Bridge labs only, once per lab.
func (l *Lab) NewSubmitter(ctx context.Context) error {
	if l.cfg.Mode != Bridge {
		return errors.New("new submitter: a Bridge lab only (in a Loopback lab the peers share its namespace)")
	}
	if l.subIP == newSubmitterIP {
		return errors.New("new submitter: this lab made one already")
	}
	old := l.subNS
	if err := deleteNetns(l.net.ip, old); err != nil {
		return fmt.Errorf("new submitter: %w", err)
	}
	l.net.forget(old)
	ns := l.name + "-sub2"
	if err := l.net.addNetns(ctx, ns); err != nil {
		return fmt.Errorf("new submitter: %w", err)
	}
	if err := l.net.attach(ctx, l.name+"-hub", "vsub2", ns, newSubmitterIP); err != nil {
		return fmt.Errorf("new submitter: %w", err)
	}
	l.subNS, l.subIP = ns, newSubmitterIP
	return nil
}

// forget drops namespace ns, deleted already, from those remove deletes.
func (o *netOps) forget(ns string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nss = slices.DeleteFunc(o.nss, func(n string) bool { return n == ns })
}

// P2PCCommand returns a command that runs the lab's p2pc with args in
// the submitter's namespace, with the environment Submit gives its runs
// (the swarm's token, the lab's TMPDIR): for p2pc jobs, attach and fetch.
func (l *Lab) P2PCCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	cmd, err := l.Command(ctx, append([]string{l.cfg.Bin}, args...)...)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(append(os.Environ(), "TMPDIR="+l.tmpDir()), l.cfg.Env...)
	cmd.Dir = l.cfg.Dir
	return cmd, nil
}
