package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/p2pc/p2pc/internal/trust"
)

// SwarmFlags say where the swarm secret comes from: --swarm (a token),
// else --swarm-file, else the default file in the user's config folder.
// A token on the command line never stays there (takeSwarmToken).
type SwarmFlags struct {
	Swarm     string `help:"The swarm's token (p2pc1-...), as printed by 'p2pc swarm init'; '-' reads it from stdin. p2pc removes it from its command line at once (it restarts itself without it) and keeps it for next time." env:"P2PC_SWARM" placeholder:"TOKEN"`
	SwarmFile string `name:"swarm-file" help:"File holding the swarm's token (default: the user's config folder, p2pc/swarm)." env:"P2PC_SWARM_FILE" type:"path" placeholder:"FILE"`
	// SwarmGiven: Swarm came from the command line (not P2PC_SWARM).
	SwarmGiven bool `kong:"-"`
}

// errNoSwarm says what to run when a command needs a swarm and there is
// no secret.
var errNoSwarm = errors.New("no swarm secret: run 'p2pc swarm init' on one machine, then paste the 'p2pc join --swarm ...' line it prints on the others")

// secretPath is the swarm file in use.
func (f *SwarmFlags) secretPath() (string, error) {
	if f.SwarmFile != "" {
		return f.SwarmFile, nil
	}
	return trust.DefaultSecretPath()
}

// secret returns the swarm secret; ok is false when there is none. A
// malformed token or file is an error (exit 2).
func (f *SwarmFlags) secret() (s trust.Secret, ok bool, err error) {
	if f.Swarm != "" {
		s, err := trust.ParseToken(f.Swarm)
		if err != nil {
			return s, false, withCode(exitBadInput, fmt.Errorf("--swarm: %w", err))
		}
		return s, true, nil
	}
	path, err := f.secretPath()
	if err != nil {
		return s, false, withCode(exitBadInput, err)
	}
	s, err = trust.LoadSecret(path)
	if errors.Is(err, trust.ErrNoSecret) {
		return s, false, nil
	}
	if err != nil {
		return s, false, withCode(exitBadInput, err)
	}
	return s, true, nil
}

// creds returns this node's credentials in the swarm: its identity from
// the data folder; its certificate issued by the creator when the data
// folder holds an invites-mode membership, else derived from the secret.
// Without either it fails with errNoSwarm (exit 2).
func (g *Globals) creds() (*trust.Creds, error) {
	if m, err := g.membership(); err != nil || m != nil {
		if err != nil {
			return nil, err
		}
		return g.issuedCreds(m)
	}
	s, ok, err := g.secret()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, withCode(exitBadInput, errNoSwarm)
	}
	id, err := trust.LoadIdentity(g.Data)
	if err != nil {
		return nil, withCode(exitBadInput, err)
	}
	c, err := trust.NewCreds(s, id)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// SwarmCmd is `p2pc swarm`: make or show the swarm secret.
type SwarmCmd struct {
	Init    SwarmInitCmd    `cmd:"" help:"Create a swarm secret and print the line to paste on the other machines."`
	Show    SwarmShowCmd    `cmd:"" help:"Print the swarm's join line again, and this node's ID."`
	Invite  SwarmInviteCmd  `cmd:"" help:"Invite-only swarm, on its creator: print a one-time 'p2pc join --invite' line that admits one machine."`
	Members SwarmMembersCmd `cmd:"" help:"Invite-only swarm, on its creator: list the identities issued."`
	Revoke  SwarmRevokeCmd  `cmd:"" help:"Invite-only swarm, on its creator: revoke an identity; the members refuse it from then on."`
}

// SwarmInitCmd is `p2pc swarm init`.
type SwarmInitCmd struct {
	Invites bool `help:"Make an invite-only swarm: its signing key stays in this data folder, and each machine joins with a one-time line from 'p2pc swarm invite' (one member, one identity)."`
}

// Run creates the secret file, refusing to replace one.
func (c *SwarmInitCmd) Run(g *Globals) error {
	if c.Invites {
		return initInvites(g)
	}
	path, err := g.secretPath()
	if err != nil {
		return withCode(exitBadInput, err)
	}
	if _, err := os.Stat(path); err == nil {
		return withCode(exitBadInput, fmt.Errorf("%s already holds a swarm secret: 'p2pc swarm show' prints it (remove the file first to make a new swarm)", path))
	}
	s, err := trust.NewSecret()
	if err != nil {
		return err
	}
	if err := trust.SaveSecret(path, s); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "p2pc: new swarm %s, secret saved in %s (mode 0600). On each spare machine, run:\n", s.SwarmID(), path)
	fmt.Printf("p2pc join --swarm %s\n", s.Token())
	return nil
}

// SwarmShowCmd is `p2pc swarm show`.
type SwarmShowCmd struct{}

// Run prints the join line (stdout) and the swarm and node IDs (stderr).
func (c *SwarmShowCmd) Run(g *Globals) error {
	if m, err := g.membership(); err != nil || m != nil {
		if err != nil {
			return err
		}
		return showInvites(g, m)
	}
	s, ok, err := g.secret()
	if err != nil {
		return err
	}
	if !ok {
		return withCode(exitBadInput, errNoSwarm)
	}
	id, err := trust.LoadIdentity(g.Data)
	if err != nil {
		return withCode(exitBadInput, err)
	}
	fmt.Printf("p2pc join --swarm %s\n", s.Token())
	fmt.Fprintf(os.Stderr, "p2pc: swarm %s; this node's ID %s\n", s.SwarmID(), id.ID)
	fmt.Fprintf(os.Stderr, "p2pc: web view token (--ui): %s\n", s.UIToken())
	return nil
}

// rememberSwarm stores a token given on the command line in the swarm
// file, so that the next 'p2pc join' needs no flag. A token from the
// environment is not stored.
func (g *Globals) rememberSwarm(s trust.Secret) error {
	if g.Swarm == "" || !g.SwarmGiven {
		return nil
	}
	path, err := g.secretPath()
	if err != nil {
		return err
	}
	if old, err := trust.LoadSecret(path); err == nil && old == s {
		return nil
	} else if err == nil {
		fmt.Fprintf(os.Stderr, "p2pc: %s held swarm %s; it now holds swarm %s\n", path, old.SwarmID(), s.SwarmID())
	}
	if err := trust.SaveSecret(path, s); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "p2pc: swarm %s saved in %s for next time\n", s.SwarmID(), path)
	return nil
}

// parseSubmitters reads --submitters node IDs.
func parseSubmitters(list []string) ([]trust.NodeID, error) {
	var ids []trust.NodeID
	for _, s := range list {
		if strings.TrimSpace(s) == "" {
			continue
		}
		id, err := trust.ParseNodeID(s)
		if err != nil {
			return nil, withCode(exitBadInput, fmt.Errorf("--submitters: %w", err))
		}
		ids = append(ids, id)
	}
	return ids, nil
}
