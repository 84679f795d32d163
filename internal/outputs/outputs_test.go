package outputs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// DigestInline must agree with Digest of the same output on disk.
func TestDigestInlineMatchesDigest(t *testing.T) {
	for _, data := range [][]byte{nil, {}, []byte("hello"), make([]byte, 100000)} {
		work, stage := t.TempDir(), filepath.Join(t.TempDir(), "stage")
		if err := Gather(work, stage, &sdk.Result{Data: data}); err != nil {
			t.Fatal(err)
		}
		want, _, err := Digest(stage)
		if err != nil {
			t.Fatal(err)
		}
		if got := DigestInline(data); got != want {
			t.Errorf("data %d bytes (nil %v): inline %s, on disk %s", len(data), data == nil, got, want)
		}
		os.RemoveAll(stage)
	}
}
