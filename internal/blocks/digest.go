package blocks

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
)

// FileDigest is the SHA-256 of a file's whole content, streamed: the
// digest of a plugin binary, of an input, and of each output file in an
// output's listing. (A file's ID in a store is its manifest's digest, not
// this.)
func FileDigest(path string) ([32]byte, error) {
	var d [32]byte
	f, err := os.Open(path)
	if err != nil {
		return d, fmt.Errorf("digest %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return d, fmt.Errorf("digest %s: %w", path, err)
	}
	copy(d[:], h.Sum(nil))
	return d, nil
}
