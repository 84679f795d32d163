package main

import "testing"

func TestListensEverywhere(t *testing.T) {
	for listen, want := range map[string]bool{
		"0.0.0.0:7070":         true,
		"[::]:0":               true,
		":7070":                true,
		"tcp://0.0.0.0:7070":   true,
		"127.0.0.2:0":          false,
		"tcp://127.0.0.3:7070": false,
		"192.168.1.5:7070":     false,
	} {
		if got := listensEverywhere(listen); got != want {
			t.Errorf("listensEverywhere(%q) = %v, want %v", listen, got, want)
		}
	}
}
