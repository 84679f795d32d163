package sandbox

import (
	"fmt"
	"os"
	"os/user"
	"runtime"
	"strconv"
)

// User is the unprivileged account task processes run as when the host
// runs as root (see TaskUser).
type User struct {
	Name     string
	UID, GID uint32
}

// String is "name(uid)".
func (u User) String() string { return u.Name + "(" + strconv.FormatUint(uint64(u.UID), 10) + ")" }

// DefaultTaskUser is the account TaskUser picks when it is given no name
// and it exists; else it picks nobody (uid 65534).
const DefaultTaskUser = "p2pc-task"

// nobody is uid and gid 65534, used when /etc/passwd names neither
// DefaultTaskUser nor nobody.
var nobody = User{Name: "nobody", UID: 65534, GID: 65534}

// TaskUser resolves the account tasks run as (on Linux: elsewhere tasks
// run as the host's user and TaskUser returns nil). A host that is not root
// cannot switch users: TaskUser returns nil (tasks run as the host's own
// user), or an error if name names another account. A root host runs
// tasks as name, or when name is "" as DefaultTaskUser if it exists,
// else as nobody; never as uid 0.
func TaskUser(name string) (*User, error) {
	if runtime.GOOS != "linux" {
		if name != "" {
			return nil, fmt.Errorf("task user %q: tasks run as another user on Linux only", name)
		}
		return nil, nil
	}
	if os.Geteuid() != 0 {
		if name == "" {
			return nil, nil
		}
		u, err := lookupUser(name)
		if err != nil {
			return nil, err
		}
		if u.UID != uint32(os.Geteuid()) {
			return nil, fmt.Errorf("task user %s: only a host run as root can run tasks as another user", u)
		}
		return nil, nil
	}
	if name == "" {
		if u, err := lookupUser(DefaultTaskUser); err == nil {
			return u, nil
		}
		if u, err := lookupUser("nobody"); err == nil && u.UID != 0 {
			return u, nil
		}
		u := nobody
		return &u, nil
	}
	u, err := lookupUser(name)
	if err != nil {
		return nil, err
	}
	if u.UID == 0 {
		return nil, fmt.Errorf("task user %s: tasks never run as root", u)
	}
	return u, nil
}

func lookupUser(name string) (*User, error) {
	pu, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.ParseUint(name, 10, 32); nerr == nil {
			pu, err = user.LookupId(name)
		}
		if err != nil {
			return nil, fmt.Errorf("task user %q: %w", name, err)
		}
	}
	uid, err := strconv.ParseUint(pu.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("task user %q: uid %q: %w", name, pu.Uid, err)
	}
	gid, err := strconv.ParseUint(pu.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("task user %q: gid %q: %w", name, pu.Gid, err)
	}
	return &User{Name: pu.Username, UID: uint32(uid), GID: uint32(gid)}, nil
}

// switches reports whether processes of p run as another user than the
// host's.
func switches(p Policy) bool {
	return p.User != nil && !isDisabled() && p.User.UID != uint32(os.Geteuid())
}

// TaskGroup is the group ID processes of p run with, if they run as
// another user than the host's.
func TaskGroup(p Policy) (gid uint32, ok bool) {
	if !switches(p) {
		return 0, false
	}
	return p.User.GID, true
}

// hostUser names the host's own account ("" if unknown).
func hostUser() string {
	uid := os.Geteuid()
	name := strconv.Itoa(uid)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return name + "(" + strconv.Itoa(uid) + ")"
}
