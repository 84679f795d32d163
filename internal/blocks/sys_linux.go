package blocks

import (
	"encoding/binary"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// crcXattr names the extended attribute in which a DiskStore records the
// CRC32C of a block file's bytes: 4 bytes, big-endian. See ReadBlock.
const crcXattr = "user.p2pc.crc32c"

// setCRC records sum on f. It reports errNoXattr if the file system does
// not support user extended attributes.
func setCRC(f *os.File, sum uint32) error {
	var v [4]byte
	binary.BigEndian.PutUint32(v[:], sum)
	err := unix.Fsetxattr(int(f.Fd()), crcXattr, v[:], 0)
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) {
		return errNoXattr
	}
	return err
}

// getCRC returns the CRC32C recorded on f, if any.
func getCRC(f *os.File) (uint32, bool) {
	var v [8]byte
	n, err := unix.Fgetxattr(int(f.Fd()), crcXattr, v[:])
	if err != nil || n != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(v[:4]), true
}

// startWriteback asks the kernel to start writing f's dirty pages now,
// without waiting: the fsync that follows (per block or per batch) then
// finds most of the data already on its way to the disk instead of
// queueing a whole batch's worth at once. It is a hint; errors are ignored.
func startWriteback(f *os.File) {
	_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}

// StartWriteback is startWriteback for a range of a file outside the store
// (FetchFile's output): it starts writing [off, off+n) back without waiting.
func StartWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// hasData reports whether [off, off+n) of f may hold data, that is, is not
// entirely a hole (never written). When the file system cannot tell, it
// says yes.
func hasData(f *os.File, off, n int64) bool {
	next, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if err != nil {
		return !errors.Is(err, unix.ENXIO) // ENXIO: no data after off
	}
	return next < off+n
}

// sameDevice reports whether the two paths are on one file system.
func sameDevice(a, b string) bool {
	var sa, sb unix.Stat_t
	if unix.Stat(a, &sa) != nil || unix.Stat(b, &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev
}

// dioAlign is the alignment direct I/O needs here: of the memory, the
// offset and the length of every write (the largest logical block size in
// common use).
const dioAlign = 4096

// openDirect opens the store-relative file name for writing with
// O_DIRECT, if the file system is backed by a device and takes direct I/O;
// nil otherwise. Memory file systems (tmpfs) gain nothing from it.
func openDirect(root *os.Root, dir, name string) *os.File {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC {
		return nil
	}
	f, err := root.OpenFile(name, os.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		return nil
	}
	return f
}

// preallocate reserves [0, size) of f without writing it (holes become
// unwritten extents; data already there is kept), so that direct writes
// into it need no block allocation. It reports whether it could.
func preallocate(f *os.File, size int64) bool {
	return size == 0 || unix.Fallocate(int(f.Fd()), 0, 0, size) == nil
}
