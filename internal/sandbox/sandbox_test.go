package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestStatus(t *testing.T) {
	for _, tt := range []struct {
		st      Status
		files   bool
		network string
		str     string
	}{
		{Status{}, false, "none", "files=none network=none syscalls=all"},
		{Status{LandlockABI: 1}, true, "none", "files=landlock-v1 network=none syscalls=all"},
		{Status{LandlockABI: 4}, true, "tcp", "files=landlock-v4 network=tcp syscalls=all"},
		{Status{LandlockABI: 7, NetNS: true, Seccomp: true}, true, "netns", "files=landlock-v7 network=netns syscalls=seccomp"},
		{Status{NetNS: true}, false, "netns", "files=none network=netns syscalls=all"},
		{Status{LandlockABI: 7, NetNS: true, Disabled: true}, false, "none", "off (test switch)"},
	} {
		if got := tt.st.Files(); got != tt.files {
			t.Errorf("%+v.Files() = %v, want %v", tt.st, got, tt.files)
		}
		if got := tt.st.Network(); got != tt.network {
			t.Errorf("%+v.Network() = %q, want %q", tt.st, got, tt.network)
		}
		if got := tt.st.String(); got != tt.str {
			t.Errorf("%+v.String() = %q, want %q", tt.st, got, tt.str)
		}
	}
}

// TestConfineThread confines one locked thread of the test process: it
// can read what the policy grants and nothing else, while the rest of
// the process is untouched.
func TestConfineThread(t *testing.T) {
	if !Probe().Files() {
		t.Skipf("no Landlock here (%s)", Probe())
	}
	dir := t.TempDir()
	allowed, secret := filepath.Join(dir, "ro", "in"), filepath.Join(dir, "secret")
	os.Mkdir(filepath.Dir(allowed), 0o755)
	for _, f := range []string{allowed, secret} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rw := filepath.Join(dir, "rw")
	os.Mkdir(rw, 0o755)
	type result struct{ readIn, readSecret, write, writeOut error }
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var r result
		if _, err := ConfineThread(Policy{ReadOnly: []string{filepath.Dir(allowed)}, ReadWrite: []string{rw}}); err != nil {
			r.readIn = err
			done <- r
			return
		}
		_, r.readIn = os.ReadFile(allowed)
		_, r.readSecret = os.ReadFile(secret)
		r.write = os.WriteFile(filepath.Join(rw, "out"), []byte("y"), 0o644)
		r.writeOut = os.WriteFile(filepath.Join(dir, "escape"), []byte("y"), 0o644)
		done <- r
	}()
	r := <-done
	if r.readIn != nil || r.write != nil {
		t.Fatalf("granted access refused: read %v, write %v", r.readIn, r.write)
	}
	if !errors.Is(r.readSecret, fs.ErrPermission) || !errors.Is(r.writeOut, fs.ErrPermission) {
		t.Fatalf("want permission denied, got read %v, write %v", r.readSecret, r.writeOut)
	}
	if _, err := os.ReadFile(secret); err != nil { // this goroutine's thread is free
		t.Fatalf("the rest of the process is confined too: %v", err)
	}
}

func TestRulesetRejectsMissingPath(t *testing.T) {
	if !Probe().Files() {
		t.Skipf("no Landlock here (%s)", Probe())
	}
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		_, err := ConfineThread(Policy{ReadWrite: []string{filepath.Join(t.TempDir(), "missing")}})
		done <- err
	}()
	if err := <-done; !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ConfineThread with a missing folder: %v, want not exist", err)
	}
}
