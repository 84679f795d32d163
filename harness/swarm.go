package harness

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/p2pc/p2pc/internal/trust"
)

// NewSwarmToken makes a fresh swarm secret and returns its token, as
// `p2pc swarm init` would print it. A lab makes one per lab and gives it
// to every process it starts (P2PC_SWARM).
func NewSwarmToken() (string, error) {
	s, err := trust.NewSecret()
	if err != nil {
		return "", fmt.Errorf("swarm token: %w", err)
	}
	return s.Token(), nil
}

// UseTestSwarm makes the p2pc processes a test starts members of one
// fresh swarm, like a user's machines after pasting the join line: it
// sets P2PC_SWARM for this process (children inherit it), and points
// XDG_CONFIG_HOME into dir so that nothing is written to the user's
// config folder. Call it from TestMain.
func UseTestSwarm(dir string) (token string, err error) {
	token, err = NewSwarmToken()
	if err != nil {
		return "", err
	}
	if err := os.Setenv("P2PC_SWARM", token); err != nil {
		return "", err
	}
	if err := os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config")); err != nil {
		return "", err
	}
	return token, nil
}
