package job

import (
	"bytes"
	"crypto/rand"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/peerpb"
	"github.com/p2pc/p2pc/internal/pluginbuild"
	"github.com/p2pc/p2pc/spec"
)

// publisher is a runner with only what publishing needs: the plugin at
// plugin, the memo in cache, a fresh per-run store.
func publisher(t *testing.T, plugin, cache string) (*runner, *blocks.DiskStore) {
	t.Helper()
	st, err := blocks.OpenDisk(t.TempDir(), blocks.DiskOptions{Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	d, err := digest.File(plugin)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{
		p: &Prepared{
			Spec:     &spec.Job{Name: "x"},
			Plugin:   &pluginbuild.Plugin{Path: plugin, Digest: d},
			cacheDir: cache,
		},
		opts:    RunOptions{Remote: &RemoteOptions{Store: st}, Phase: func(string) {}},
		log:     slog.New(slog.DiscardHandler),
		faulted: make(chan struct{}),
	}
	return r, st
}

// held counts the blocks st holds on disk.
func held(t *testing.T, st *blocks.DiskStore) int {
	t.Helper()
	n := 0
	if err := st.List(t.Context(), func(blocks.ID, int64) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func fileID(h *peerpb.Hello) blocks.ID { return blocks.ID(h.Plugin.FileId) }

func TestPublishRecalledHello(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	cache := filepath.Join(dir, "cache")
	plugin := filepath.Join(dir, "plugin")
	content := make([]byte, 2<<20+77) // three blocks
	rand.Read(content)
	if err := os.WriteFile(plugin, content, 0o755); err != nil {
		t.Fatal(err)
	}

	// Cold: published before the hello, and the manifest remembered.
	r, st := publisher(t, plugin, cache)
	stop := r.startPublish(ctx)
	cold, err := r.publish(ctx)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if n := held(t, st); n != 4 {
		t.Fatalf("cold run: store holds %d blocks, want 3 and the manifest", n)
	}

	// Warm: the same hello at once, nothing written until a read asks.
	r, st = publisher(t, plugin, cache)
	stop = r.startPublish(ctx)
	warm, err := r.publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fileID(warm) != fileID(cold) || warm.Plugin.Size != cold.Plugin.Size {
		t.Fatalf("recalled hello names %x, published %x", warm.Plugin.FileId, cold.Plugin.FileId)
	}
	if n := held(t, st); n != 0 {
		t.Fatalf("warm run before any read: store holds %d blocks, want none", n)
	}
	if ok, err := st.Has(ctx, fileID(warm)); err != nil || !ok {
		t.Fatalf("Has(promised manifest) = %v, %v", ok, err)
	}
	m, err := blocks.ReadManifest(ctx, st, fileID(warm))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := blocks.WriteFile(ctx, st, m, &out); err != nil || !bytes.Equal(out.Bytes(), content) {
		t.Fatalf("file read back through the promise: %v", err)
	}
	stop()

	// Warm, never asked: stop ends the wait and leaves nothing promised.
	r, st = publisher(t, plugin, cache)
	stop = r.startPublish(ctx)
	if _, err := r.publish(ctx); err != nil {
		t.Fatal(err)
	}
	stop()
	if ok, _ := st.Has(ctx, fileID(warm)); ok || held(t, st) != 0 {
		t.Fatal("a run that ended unasked still promises or holds blocks")
	}

	// Warm, and the file changed (same size) after its digest was taken:
	// never served under the old ID, and publishing reports it.
	r, st = publisher(t, plugin, cache)
	stop = r.startPublish(ctx)
	defer stop()
	if _, err := r.publish(ctx); err != nil {
		t.Fatal(err)
	}
	content[0] ^= 1
	if err := os.WriteFile(plugin, content, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, fileID(warm)); !errors.Is(err, errChangedFile) {
		t.Fatalf("Get of the promised manifest of a changed file: %v, want errChangedFile", err)
	}
	if _, err := st.Get(ctx, m.Blocks[0]); !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("Get of the old first block: %v, want ErrNotFound", err)
	}
	if _, err := r.publish(ctx); !errors.Is(err, errChangedFile) {
		t.Fatalf("publish after the failure: %v, want errChangedFile", err)
	}
}
