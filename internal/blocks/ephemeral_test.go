package blocks

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
)

// TestEphemeralSyncsNoBlock: a file put into an ephemeral store is read
// back whole, and no block or directory of blocks was fsynced, where a
// durable store fsyncs them.
func TestEphemeralSyncsNoBlock(t *testing.T) {
	ctx := context.Background()
	data := make([]byte, 3*DefaultBlockSize+123)
	rand.Read(data)
	src := filepath.Join(t.TempDir(), "plugin")
	if err := os.WriteFile(src, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, ephemeral := range []bool{false, true} {
		d, err := OpenDisk(t.TempDir(), DiskOptions{Ephemeral: ephemeral})
		if err != nil {
			t.Fatal(err)
		}
		_, id, err := PutPath(ctx, d, src, DefaultBlockSize)
		if err != nil {
			t.Fatal(err)
		}
		dest := filepath.Join(t.TempDir(), "out")
		if err := ExportFile(ctx, d, id, dest); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(dest); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ephemeral %v: read back %d bytes (%v), want %d", ephemeral, len(got), err, len(data))
		}
		syncs := d.syncs.Load()
		d.Close()
		if ephemeral != (syncs == 0) {
			t.Errorf("ephemeral %v: %d fsyncs of blocks and their directories", ephemeral, syncs)
		}
	}
}
