package sdk

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmptyDir: emptyDir sees any entry, whatever its name or how many
// there are, and is false for what is not a folder.
func TestEmptyDir(t *testing.T) {
	for _, c := range []struct {
		name  string
		files []string
		want  bool
	}{
		{"empty", nil, true},
		{"file", []string{"a"}, false},
		{"dot file", []string{".x"}, false},
		{"dot dot prefix", []string{"..a"}, false},
		{"long name", []string{strings.Repeat("n", 255)}, false},
		{"many", []string{"a", "b", "c", strings.Repeat("m", 200), strings.Repeat("k", 250), ".y"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range c.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := emptyDir(dir); got != c.want {
				t.Fatalf("emptyDir = %v, want %v", got, c.want)
			}
		})
	}
	dir := t.TempDir()
	if emptyDir(filepath.Join(dir, "missing")) {
		t.Fatal("a missing folder is empty")
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if emptyDir(file) {
		t.Fatal("a file is an empty folder")
	}
	// A folder whose entries were all removed again is empty.
	many := t.TempDir()
	for i := range 300 {
		name := filepath.Join(many, strings.Repeat("x", 100)+string(rune('a'+i%26))+strings.Repeat("y", i%50))
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if emptyDir(many) {
		t.Fatal("a folder of many entries is empty")
	}
	ents, _ := os.ReadDir(many)
	for _, e := range ents {
		os.Remove(filepath.Join(many, e.Name()))
	}
	if !emptyDir(many) {
		t.Fatal("a folder emptied again is not empty")
	}
}
