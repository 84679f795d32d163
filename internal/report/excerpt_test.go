package report

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestExcerpt(t *testing.T) {
	panicText, err := os.ReadFile("testdata/panic.txt") // a plugin's panic as the SDK reports it
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 150) // 300 bytes
	for _, c := range []struct {
		name     string
		text     string
		headline string
		detail   []string
	}{
		{"one line", "echo: failing as asked", "echo: failing as asked", nil},
		{"task ID left out", "task 0001 failed: echo: failing as asked", "echo: failing as asked", nil},
		{"a crash", "pluginhost: run task \"b\": plugin crashed: plugin pid 7 (exit status 3); stderr:\nbye",
			"plugin crashed: plugin pid 7 (exit status 3)", []string{"bye"}},
		{"exec: status and stderr", "task 0000 failed: exec: sh exited with status 127; stderr:\n/bin/sh: 1: nosuchprogram: not found\n",
			"exec: sh exited with status 127", []string{"/bin/sh: 1: nosuchprogram: not found"}},
		{"the last five lines", "failed\n1\n2\n\n3\n4\n5\n6\n7\n", "failed", []string{"3", "4", "5", "6", "7"}},
		{"long lines cut on a character", "failed\n" + long, "failed", []string{strings.Repeat("é", 100) + "…"}},
		{"a panic: where it happened", string(panicText), "panic: echo: panicking as asked",
			[]string{"main.(*echo).Run", "    github.com/p2pc/p2pc/plugins/echo/echo.go:65"}},
		{"a panic in stderr", "plugin crashed (exit status 2); stderr:\nsome log\npanic: boom\n\ngoroutine 1 [running]:\nmain.f(0x1)\n\t/x/f.go:3 +0x1d\nmain.main()\n\t/x/main.go:9 +0x2a\nexit status 2",
			"plugin crashed (exit status 2)", []string{"panic: boom", "main.f", "    /x/f.go:3", "main.main", "    /x/main.go:9"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, d := Excerpt(c.text)
			if h != c.headline || !reflect.DeepEqual(d, c.detail) {
				t.Errorf("Excerpt = %q, %q\nwant %q, %q", h, d, c.headline, c.detail)
			}
			n := 0
			for _, l := range d {
				n += len(l)
			}
			if len(d) > ExcerptLines || n > ExcerptBytes {
				t.Errorf("%d lines, %d bytes: over the bounds", len(d), n)
			}
		})
	}
}
