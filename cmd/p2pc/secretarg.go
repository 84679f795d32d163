package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// swarmHandoffEnv names the descriptor from which a p2pc re-executed
// without its --swarm token reads that token (hideSwarmToken).
const swarmHandoffEnv = "P2PC_SWARM_FD"

// swarmToken is a token given with --swarm on the command line.
type swarmToken struct {
	token string
	given bool
}

// takeSwarmToken keeps the swarm token out of the process table. Every
// user of a machine can read any process's command line
// (/proc/PID/cmdline, ps), so a p2pc whose command line holds
// --swarm TOKEN re-executes itself (same PID) without it, handing the
// token over through a pipe; it returns only when it could not, or when
// there was nothing to hide. `--swarm -` reads the token from stdin. The
// P2PC_SWARM variable is removed from the environment its children see
// (dropSwarmEnv). It returns the arguments left for kong.
func takeSwarmToken(args []string, stdin io.Reader) ([]string, swarmToken, error) {
	if fd := os.Getenv(swarmHandoffEnv); fd != "" {
		os.Unsetenv(swarmHandoffEnv)
		tok, err := readHandoff(fd)
		if err != nil {
			return nil, swarmToken{}, err
		}
		return args, swarmToken{token: tok, given: true}, nil
	}
	rest, tok, found := cutSwarmArg(args)
	if !found {
		return args, swarmToken{}, nil
	}
	if tok == "-" {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && (err != io.EOF || line == "") {
			return nil, swarmToken{}, fmt.Errorf("--swarm -: read the token from stdin: %w", err)
		}
		return rest, swarmToken{token: strings.TrimSpace(line), given: true}, nil
	}
	if err := reexecWithout(rest, tok); err != nil {
		fmt.Fprintf(os.Stderr, "p2pc: warning: the swarm token stays in this process's command line, where every user of this machine can read it (%v); give it with --swarm-file FILE or --swarm - instead\n", err)
	}
	return rest, swarmToken{token: tok, given: true}, nil
}

// cutSwarmArg returns args without "--swarm TOKEN" (or "--swarm=TOKEN"),
// and the token. Arguments after "--" are left alone.
func cutSwarmArg(args []string) (rest []string, token string, found bool) {
	rest = make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(rest, args[i:]...), token, found
		case a == "--swarm" && i+1 < len(args):
			token, found = args[i+1], true
			i++
		case strings.HasPrefix(a, "--swarm="):
			token, found = strings.TrimPrefix(a, "--swarm="), true
		default:
			rest = append(rest, a)
		}
	}
	return rest, token, found
}

// readHandoff reads the token a p2pc handed over to its re-executed self
// on descriptor fd, and closes it.
func readHandoff(fd string) (string, error) {
	n, err := strconv.Atoi(fd)
	if err != nil || n < 3 {
		return "", fmt.Errorf("%s=%q: not a descriptor", swarmHandoffEnv, fd)
	}
	f := os.NewFile(uintptr(n), "swarm token")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("read the swarm token handed over on descriptor %d: %w", n, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// dropSwarmEnv removes P2PC_SWARM from the environment once kong has read
// it, so that no process p2pc starts (the Go toolchain that builds a
// plugin, say) inherits the secret.
func dropSwarmEnv() { os.Unsetenv("P2PC_SWARM") }

// envWithout returns env without the variables named.
func envWithout(env []string, names ...string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || name == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}
