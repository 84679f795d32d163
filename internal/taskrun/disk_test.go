package taskrun

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/p2pc/p2pc/internal/sandbox"
)

func TestCheckDisk(t *testing.T) {
	taskErr := errors.New("task t failed: write big: file too large")
	other := errors.New("task t failed: bad input")
	for _, tt := range []struct {
		name   string
		files  map[string]int
		limit  int64
		err    error
		isDisk bool
	}{
		{"no limit", map[string]int{"a": 100}, 0, nil, false},
		{"under", map[string]int{"a": 40, "d/b": 50}, 100, nil, false},
		{"over in total", map[string]int{"a": 60, "d/b": 50}, 100, nil, true},
		{"EFBIG", map[string]int{"a": 10}, 100, taskErr, true},
		{"failed at the limit", map[string]int{"a": 100}, 100, other, true},
		{"done at the limit", map[string]int{"a": 100}, 100, nil, false},
		{"failed under the limit", map[string]int{"a": 10}, 100, other, false},
	} {
		dir := t.TempDir()
		for name, n := range tt.files {
			p := filepath.Join(dir, name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		err := checkDisk(dir, tt.limit, tt.err)
		var le *sandbox.LimitError
		if got := errors.As(err, &le) && le.What == "disk"; got != tt.isDisk {
			t.Errorf("%s: checkDisk = %v, disk limit %v, want %v", tt.name, err, got, tt.isDisk)
		}
		if tt.err != nil && !errors.Is(err, tt.err) {
			t.Errorf("%s: %v lost the task's error", tt.name, err)
		}
	}
}
