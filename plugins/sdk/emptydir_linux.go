package sdk

import (
	"syscall"
	"unsafe"
)

// emptyDir reports whether dir is an existing, empty folder. It runs
// after every task of a batch, so it makes three system calls (open,
// one getdents64, close) where os.Open and Readdirnames make five or six
// and allocate a directory buffer: in a confined plugin process each
// call also passes the seccomp filter and Landlock.
//
// One read suffices: the kernel fills the buffer until the next entry
// does not fit, and any entry (a name of at most 255 bytes) fits beside
// "." and ".." in it, so a read that returns only those two and leaves
// room for another entry has seen the whole folder.
func emptyDir(dir string) bool {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var buf [2048]byte
	for {
		n, err := syscall.Getdents(fd, buf[:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		if !onlyDots(buf[:n]) {
			return false
		}
		if n == 0 || n < len(buf)-maxDirent {
			return true
		}
	}
}

// maxDirent is the largest linux_dirent64 record: 19 bytes of header, a
// name of at most 255 bytes and its NUL, rounded up to 8.
const maxDirent = 280

// onlyDots reports whether the linux_dirent64 records in b name only "."
// and "..": d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), then
// the NUL-terminated name.
func onlyDots(b []byte) bool {
	for off := 0; off < len(b); {
		if off+19 > len(b) {
			return false
		}
		reclen := int(*(*uint16)(unsafe.Pointer(&b[off+16])))
		if reclen < 20 || off+reclen > len(b) {
			return false
		}
		name := b[off+19 : off+reclen]
		if len(name) < 2 || !(name[0] == '.' && (name[1] == 0 || name[1] == '.' && len(name) > 2 && name[2] == 0)) {
			return false
		}
		off += reclen
	}
	return true
}
