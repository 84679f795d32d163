package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"strings"
)

// commandLine is a step's command: a list of strings, the same on every
// machine, or a mapping from platform to list, of which the machine
// running the task takes its GOOS/GOARCH's entry ("linux/arm64"), else
// its GOOS's ("linux"), else "default"'s. Decoding picks the entry.
type commandLine []string

func (c *commandLine) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' {
		var l []string
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("exec: command must be a list of strings or a mapping from platform (linux, linux/arm64, windows, default) to one: %w", err)
		}
		*c = l
		return nil
	}
	var m map[string][]string
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("exec: a per-platform command maps a platform (linux, linux/arm64, windows, default) to a list of strings: %w", err)
	}
	l, err := pickCommand(m, runtime.GOOS, runtime.GOARCH)
	*c = l
	return err
}

// pickCommand is the entry of m for goos/goarch (commandLine).
func pickCommand(m map[string][]string, goos, goarch string) ([]string, error) {
	for _, k := range []string{goos + "/" + goarch, goos, "default"} {
		if l, ok := m[k]; ok {
			if len(l) == 0 {
				return nil, fmt.Errorf("exec: command for %s is empty", k)
			}
			return l, nil
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return nil, fmt.Errorf("exec: the command has no entry for this machine, %s/%s (it has %s; add %s, %s/%s or default, or constrain the job with resources: {os: ...})",
		goos, goarch, strings.Join(keys, ", "), goos, goos, goarch)
}
