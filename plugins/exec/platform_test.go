package main

import (
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestPickCommand(t *testing.T) {
	m := map[string][]string{"linux": {"uname"}, "linux/arm64": {"arm"}, "default": {"other"}, "windows": {}}
	for _, c := range []struct {
		goos, goarch string
		want         string // "" for an error
		err          string
	}{
		{"linux", "arm64", "arm", ""},
		{"linux", "amd64", "uname", ""},
		{"darwin", "arm64", "other", ""},
		{"windows", "amd64", "", "command for windows is empty"},
	} {
		got, err := pickCommand(m, c.goos, c.goarch)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s/%s: %v, %v; want error %q", c.goos, c.goarch, got, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != 1 || got[0] != c.want {
			t.Errorf("%s/%s: %v, %v; want [%s]", c.goos, c.goarch, got, err, c.want)
		}
	}
	_, err := pickCommand(map[string][]string{"windows": {"cmd"}}, "linux", "riscv64")
	if err == nil || !strings.Contains(err.Error(), "no entry for this machine, linux/riscv64 (it has windows;") {
		t.Errorf("no entry: %v", err)
	}
}

func TestCommandLineDecodes(t *testing.T) {
	var s step
	if err := json.Unmarshal([]byte(`{"command": ["a", "b"]}`), &s); err != nil || !slices.Equal(s.Command, []string{"a", "b"}) {
		t.Errorf("list: %v, %v", s.Command, err)
	}
	host := `{"command": {"` + runtime.GOOS + `/` + runtime.GOARCH + `": ["mine"], "default": ["x"]}}`
	if err := json.Unmarshal([]byte(host), &s); err != nil || !slices.Equal(s.Command, []string{"mine"}) {
		t.Errorf("per platform: %v, %v", s.Command, err)
	}
	if err := json.Unmarshal([]byte(`{"command": "ls"}`), &s); err == nil || !strings.Contains(err.Error(), "list of strings or a mapping from platform") {
		t.Errorf("a string: %v", err)
	}
}
