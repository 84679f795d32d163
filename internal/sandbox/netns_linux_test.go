//go:build linux

package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// confinedNetNS confines a fresh thread with conf and returns its
// network namespace and the error of reading file outside, which the
// policy does not grant.
func confinedNetNS(t *testing.T, conf *Confinement, outside string) (string, error) {
	t.Helper()
	var ns string
	var readErr error
	err := onFreshThread(func() error {
		if _, err := conf.confineThread(false); err != nil {
			return err
		}
		_, readErr = os.ReadFile(outside)
		var err error
		ns, err = os.Readlink("/proc/thread-self/ns/net") // Landlock rules opens, not readlink
		return err
	})
	if err != nil {
		t.Fatalf("confine: %v", err)
	}
	return ns, readErr
}

// TestConfinementShared: threads confined with one Confinement share its
// private network namespace, each under the policy's file rules; after
// Close the next thread gets a new namespace.
func TestConfinementShared(t *testing.T) {
	st := Probe()
	if !st.NetNS || !st.Files() {
		t.Skipf("no network namespaces or Landlock here (%s)", st)
	}
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("x"), 0o600)
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o755)
	conf := NewConfinement(Policy{ReadWrite: []string{work}})
	defer conf.Close()
	host, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	a, errA := confinedNetNS(t, conf, secret)
	b, errB := confinedNetNS(t, conf, secret)
	if a == "" || a != b || a == host {
		t.Errorf("namespaces %q and %q, host %q: want one private namespace for both", a, b, host)
	}
	for _, err := range []error{errA, errB} {
		if !errors.Is(err, fs.ErrPermission) {
			t.Errorf("read outside the policy: %v, want permission denied", err)
		}
	}
	conf.Close()
	if c, _ := confinedNetNS(t, conf, secret); c == a || c == host {
		t.Errorf("after Close: namespace %q, want a new one (was %q)", c, a)
	}
}
