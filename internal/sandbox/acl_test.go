//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestWithUser(t *testing.T) {
	base := []aclEntry{{tagUserObj, 7, noID}, {tagGroupObj, 0, noID}, {tagOther, 0, noID}}
	for _, tt := range []struct {
		name string
		in   []aclEntry
		uid  uint32
		perm uint16
		want []aclEntry
	}{
		{"minimal ACL", base, 65534, permX,
			[]aclEntry{{tagUserObj, 7, noID}, {tagUser, 1, 65534}, {tagGroupObj, 0, noID}, {tagMask, 1, noID}, {tagOther, 0, noID}}},
		{"existing entry gains", []aclEntry{{tagUserObj, 7, noID}, {tagUser, 1, 65534}, {tagGroupObj, 5, noID}, {tagMask, 5, noID}, {tagOther, 0, noID}}, 65534, permR | permW,
			[]aclEntry{{tagUserObj, 7, noID}, {tagUser, 7, 65534}, {tagGroupObj, 5, noID}, {tagMask, 7, noID}, {tagOther, 0, noID}}},
		{"sorted by id", []aclEntry{{tagUserObj, 7, noID}, {tagUser, 4, 2000}, {tagGroupObj, 0, noID}, {tagMask, 4, noID}, {tagOther, 0, noID}}, 1000, permX,
			[]aclEntry{{tagUserObj, 7, noID}, {tagUser, 1, 1000}, {tagUser, 4, 2000}, {tagGroupObj, 0, noID}, {tagMask, 5, noID}, {tagOther, 0, noID}}},
	} {
		got := withUser(tt.in, tt.uid, tt.perm)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
		if back, err := decodeACL(encodeACL(got)); err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("%s: decode(encode) = %v, %v", tt.name, back, err)
		}
	}
}

// TestGrant: the task user can pass through a 0700 folder and read the
// file named read-only after Grant, and nothing else changes for others.
func TestGrant(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a task user)")
	}
	u, err := TaskUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "closed")
	os.Mkdir(dir, 0o700)
	in := filepath.Join(dir, "in")
	os.WriteFile(in, []byte("x"), 0o600)
	other := filepath.Join(dir, "other")
	os.WriteFile(other, []byte("x"), 0o600)
	if err := Grant(Policy{ReadOnly: []string{in}, User: u}, nil); err != nil {
		t.Fatal(err)
	}
	acl, err := readACL(dir, 0)
	if err != nil || !reflect.DeepEqual(acl[1], aclEntry{tagUser, permX, u.UID}) {
		t.Errorf("ACL of the folder: %v %v, want search for %s", acl, err, u)
	}
	acl, err = readACL(in, 0)
	if err != nil || !reflect.DeepEqual(acl[1], aclEntry{tagUser, permR, u.UID}) {
		t.Errorf("ACL of the input: %v %v, want read for %s", acl, err, u)
	}
	if acl, err := readACL(other, 0o600); err != nil || len(acl) != 3 {
		t.Errorf("ACL of a file not named: %v %v, want none", acl, err)
	}
}

// TestUnreadable: the files a task user cannot read by their own
// permissions are those Grant must open, and no longer once it has.
func TestUnreadable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a task user other than the host's)")
	}
	u, err := TaskUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	open, closed := filepath.Join(dir, "open"), filepath.Join(dir, "closed")
	os.WriteFile(open, []byte("x"), 0o644)
	os.WriteFile(closed, []byte("x"), 0o600)
	pol := Policy{ReadOnly: []string{open, closed}, User: u}
	if got := Unreadable([]string{open, closed}, pol); len(got) != 1 || got[0] != closed {
		t.Fatalf("Unreadable = %v, want [%s]", got, closed)
	}
	if err := Grant(pol, nil); err != nil {
		t.Skipf("no ACLs here: %v", err)
	}
	if got := Unreadable([]string{open, closed}, pol); len(got) != 0 {
		t.Fatalf("after Grant: Unreadable = %v, want none", got)
	}
}
