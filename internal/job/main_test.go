package job

import (
	"os"
	"testing"

	"github.com/p2pc/p2pc/internal/testwait"
)

// TestMain fails the package's tests if a goroutine outlives them.
func TestMain(m *testing.M) {
	os.Exit(testwait.Main(m))
}
