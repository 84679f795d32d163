//go:build linux

package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"
)

// Granting the task user what a policy names. When tasks run as another
// user than the host's, the files and folders the policy names must be
// open to that user in the file system's own permissions too (Landlock
// only takes rights away). Grant gives them to that one user with POSIX
// ACL entries (user:UID:perm), so nobody else gains anything:
//
//   - ReadWrite folders: rwx (a folder the host makes in one later for a
//     task, such as a slot's work folder, is handed over with Own);
//   - ReadOnly files and folders: r (and x for folders and executables),
//     unless the mode bits for others give it already;
//   - every folder above them that the user cannot search: x only (pass
//     through by name, not list).

// ACL xattr format (linux/posix_acl_xattr.h).
const (
	aclAccess   = "system.posix_acl_access"
	aclVersion  = 2
	tagUserObj  = 0x01
	tagUser     = 0x02
	tagGroupObj = 0x04
	tagGroup    = 0x08
	tagMask     = 0x10
	tagOther    = 0x20
	noID        = 0xffffffff
	permR       = 4
	permW       = 2
	permX       = 1
)

type aclEntry struct {
	tag, perm uint16
	id        uint32
}

// Grant opens what p names to p.User (see above). It does nothing when
// tasks run as the host's user or confinement is off.
func Grant(p Policy, log *slog.Logger) error {
	if Credential(p) == nil {
		return nil
	}
	u := *p.User
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	searched := map[string]bool{}
	for _, path := range p.ReadWrite {
		errs = append(errs, grantPath(path, u, permR|permW|permX), grantSearch(filepath.Dir(path), u, searched, log))
	}
	for _, path := range p.ReadOnly {
		fi, err := os.Stat(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("grant %s to task user %s: %w", path, u, err))
			continue
		}
		perm := uint16(permR)
		if fi.IsDir() || fi.Mode()&0o111 != 0 {
			perm |= permX
		}
		if !allowed(fi, u, perm) {
			errs = append(errs, grantPath(path, u, perm))
		}
		errs = append(errs, grantSearch(filepath.Dir(path), u, searched, log))
	}
	return errors.Join(errs...)
}

// Unreadable returns those of paths that p's task user could not read by
// their own permissions (mode bits, or an ACL entry for that user): the
// files Grant opens to it with an ACL entry of their own when they are in
// p.ReadOnly. None when tasks run as the host's user.
func Unreadable(paths []string, p Policy) []string {
	if Credential(p) == nil {
		return nil
	}
	var out []string
	for _, path := range paths {
		fi, err := os.Stat(path)
		if err != nil {
			continue // the caller reports what cannot be read at all
		}
		if !allowed(fi, *p.User, permR) && !aclAllows(path, p.User.UID, permR) {
			out = append(out, path)
		}
	}
	return out
}

// aclAllows reports whether path's access ACL gives uid perm by an entry
// of its own (within the mask).
func aclAllows(path string, uid uint32, perm uint16) bool {
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(path, aclAccess, buf)
	if err != nil {
		return false
	}
	acl, err := decodeACL(buf[:n])
	if err != nil {
		return false
	}
	mask, mine := uint16(7), uint16(0)
	for _, e := range acl {
		switch {
		case e.tag == tagMask:
			mask = e.perm
		case e.tag == tagUser && e.id == uid:
			mine = e.perm
		}
	}
	return mine&mask&perm == perm
}

// grantSearch lets u search dir and every folder above it.
func grantSearch(dir string, u User, done map[string]bool, log *slog.Logger) error {
	for ; !done[dir]; dir = filepath.Dir(dir) {
		done[dir] = true
		fi, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("grant search of %s to task user %s: %w", dir, u, err)
		}
		if !allowed(fi, u, permX) {
			if err := grantPath(dir, u, permX); err != nil {
				return err
			}
			log.Info("let the task user pass through a folder (ACL entry, search only)", "dir", dir, "user", u.String())
		}
		if dir == "/" || dir == "." {
			break
		}
	}
	return nil
}

// allowed reports whether u has perm on fi by its mode bits (the owner's,
// the group's or others', whichever apply to u).
func allowed(fi os.FileInfo, u User, perm uint16) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	mode := uint16(fi.Mode().Perm())
	var bits uint16
	switch {
	case st.Uid == u.UID:
		bits = mode >> 6
	case st.Gid == u.GID:
		bits = mode >> 3
	default:
		bits = mode
	}
	return bits&perm == perm
}

// grantPath adds perm for u to path's access ACL.
func grantPath(path string, u User, perm uint16) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("grant %s to task user %s: %w", path, u, err)
	}
	acl, err := readACL(path, uint16(fi.Mode().Perm()))
	if err != nil {
		return fmt.Errorf("grant %s to task user %s: %w", path, u, err)
	}
	if err := unix.Setxattr(path, aclAccess, encodeACL(withUser(acl, u.UID, perm)), 0); err != nil {
		return fmt.Errorf("grant %s to task user %s: set ACL: %w", path, u, err)
	}
	return nil
}

// readACL reads path's access ACL, or the minimal ACL of mode if it has
// none.
func readACL(path string, mode uint16) ([]aclEntry, error) {
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(path, aclAccess, buf)
	if errors.Is(err, unix.ENODATA) || (err == nil && n <= 4) {
		return []aclEntry{
			{tagUserObj, mode >> 6 & 7, noID},
			{tagGroupObj, mode >> 3 & 7, noID},
			{tagOther, mode & 7, noID},
		}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ACL: %w", err)
	}
	return decodeACL(buf[:n])
}

func decodeACL(b []byte) ([]aclEntry, error) {
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != aclVersion || (len(b)-4)%8 != 0 {
		return nil, errors.New("read ACL: unknown format")
	}
	var acl []aclEntry
	for b = b[4:]; len(b) > 0; b = b[8:] {
		acl = append(acl, aclEntry{binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:]), binary.LittleEndian.Uint32(b[4:])})
	}
	return acl, nil
}

func encodeACL(acl []aclEntry) []byte {
	b := binary.LittleEndian.AppendUint32(nil, aclVersion)
	for _, e := range acl {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// withUser adds perm to uid's entry (making one) and sets the mask to
// what the named entries and the owning group need, as setfacl does. The
// entries stay sorted by tag and id, as the kernel requires.
func withUser(acl []aclEntry, uid uint32, perm uint16) []aclEntry {
	acl = slices.Clone(acl)
	i := slices.IndexFunc(acl, func(e aclEntry) bool { return e.tag == tagUser && e.id == uid })
	if i < 0 {
		acl = append(acl, aclEntry{tagUser, 0, uid})
		i = len(acl) - 1
	}
	acl[i].perm |= perm
	var mask uint16
	acl = slices.DeleteFunc(acl, func(e aclEntry) bool { return e.tag == tagMask })
	for _, e := range acl {
		if e.tag == tagUser || e.tag == tagGroup || e.tag == tagGroupObj {
			mask |= e.perm
		}
	}
	acl = append(acl, aclEntry{tagMask, mask, noID})
	slices.SortFunc(acl, func(a, b aclEntry) int {
		if a.tag != b.tag {
			return int(a.tag) - int(b.tag)
		}
		return int(int64(a.id) - int64(b.id))
	})
	return acl
}

// Own hands dir, a folder the host made for a task of p (a slot's or an
// attempt's work folder), to p's task user. It does nothing when tasks
// run as the host's user.
func Own(dir string, p Policy) error {
	c := Credential(p)
	if c == nil {
		return nil
	}
	if err := os.Chown(dir, int(c.Uid), int(c.Gid)); err != nil {
		return fmt.Errorf("hand %s to task user %s: %w", dir, p.User, err)
	}
	return nil
}

// Credential is the identity a process of p runs as: nil for the host's
// own (no task user, the same uid, or confinement off).
func Credential(p Policy) *syscall.Credential {
	if !switches(p) {
		return nil
	}
	return &syscall.Credential{Uid: p.User.UID, Gid: p.User.GID, Groups: []uint32{}}
}

// GrantTree lets p's task user read every file and folder beneath root
// that it cannot read by the mode bits (an ACL entry each): the tasks'
// outputs a reduce step reads, written by the host.
func GrantTree(root string, p Policy) error {
	if Credential(p) == nil {
		return nil
	}
	u := *p.User
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := uint16(permR)
		if d.IsDir() {
			perm |= permX
		}
		if fi.Mode().IsRegular() || d.IsDir() {
			if !allowed(fi, u, perm) {
				return grantPath(path, u, perm)
			}
		}
		return nil
	})
}

// Reclaim makes file path, written by a task user, the host's own
// (this process's uid and gid), without set-user-ID or set-group-ID
// bits: an artifact placed in the submitter's output folder is theirs
// to change and remove, like the tasks' outputs the host writes. A
// file with another name (a hard link the task made) is copied instead,
// so no other name changes owner. Nothing when path is the host's own.
func Reclaim(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("reclaim %s: %w", path, err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("reclaim %s: %w", path, err)
	}
	uid, gid := os.Geteuid(), os.Getegid()
	perm := os.FileMode(st.Mode) & os.ModePerm
	if int(st.Uid) == uid && int(st.Gid) == gid && st.Mode&(syscall.S_ISUID|syscall.S_ISGID) == 0 {
		return nil
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fmt.Errorf("reclaim %s: not a regular file", path)
	}
	if st.Nlink > 1 {
		return reclaimCopy(f, path, perm)
	}
	if err := f.Chown(uid, gid); err != nil {
		return fmt.Errorf("reclaim %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil { // chown clears them; to be sure
		return fmt.Errorf("reclaim %s: %w", path, err)
	}
	return nil
}

// reclaimCopy replaces path by a copy of f made by this process.
func reclaimCopy(f *os.File, path string, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".reclaim-*")
	if err != nil {
		return fmt.Errorf("reclaim %s: %w", path, err)
	}
	_, err = io.Copy(tmp, f)
	err = errors.Join(err, tmp.Chmod(perm), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("reclaim %s: %w", path, err)
	}
	return nil
}
