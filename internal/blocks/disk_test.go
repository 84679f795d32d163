package blocks_test

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/blocks/blockstest"
)

func blockFile(dir string, id blocks.ID) string {
	s := id.String()
	return filepath.Join(dir, "blocks", s[:2], s)
}

// flipByte corrupts a block file in place, as a failing disk would.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	makeWritable(t, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// makeWritable lets the test damage a file the store keeps read-only:
// root writes it anyway, an ordinary user must change its mode first.
func makeWritable(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func quarantined(t *testing.T, dir string) []string {
	t.Helper()
	return dirNames(t, filepath.Join(dir, "quarantine"))
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// tempFiles lists every temporary file under dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".tmp-") {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func TestDiskCorruptionQuarantined(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	id, data := blockstest.Block(1, 4096)
	other, otherData := blockstest.Block(2, 4096)
	for _, b := range []struct {
		id   blocks.ID
		data []byte
	}{{id, data}, {other, otherData}} {
		if err := s.Put(t.Context(), b.id, b.data); err != nil {
			t.Fatal(err)
		}
	}
	flipByte(t, blockFile(dir, id), 1000)

	_, err := s.Get(t.Context(), id)
	if !errors.Is(err, blocks.ErrCorrupt) {
		t.Fatalf("Get(corrupt) = %v, want ErrCorrupt", err)
	}
	if !strings.Contains(err.Error(), id.Short()) {
		t.Errorf("error %q does not name the block", err)
	}
	if ok, _ := s.Has(t.Context(), id); ok {
		t.Fatal("Has(corrupt block) = true after Get")
	}
	if _, err := s.Get(t.Context(), id); !errors.Is(err, blocks.ErrNotFound) {
		t.Fatalf("second Get = %v, want ErrNotFound", err)
	}
	q := quarantined(t, dir)
	if len(q) != 1 || !strings.HasPrefix(q[0], id.String()) {
		t.Fatalf("quarantine holds %v", q)
	}
	if n, size := s.Usage(); n != 1 || size != 4096 {
		t.Fatalf("Usage = %d, %d; want 1, 4096", n, size)
	}
	// The block can be fetched again and put.
	if err := s.Put(t.Context(), id, data); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(t.Context(), id); err != nil || string(got) != string(data) {
		t.Fatalf("Get after re-put: %v", err)
	}
}

func TestDiskTruncatedAndGrownBlocks(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	a, aData := blockstest.Block(1, 1000)
	b, bData := blockstest.Block(2, 1000)
	for id, data := range map[blocks.ID][]byte{a: aData, b: bData} {
		if err := s.Put(t.Context(), id, data); err != nil {
			t.Fatal(err)
		}
	}
	makeWritable(t, blockFile(dir, a))
	makeWritable(t, blockFile(dir, b))
	if err := os.Truncate(blockFile(dir, a), 500); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blockFile(dir, b), append(bData, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range []blocks.ID{a, b} {
		if _, err := s.Get(t.Context(), id); !errors.Is(err, blocks.ErrCorrupt) {
			t.Errorf("Get(%s) = %v, want ErrCorrupt", id.Short(), err)
		}
	}
}

func TestDiskVerify(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	var ids []blocks.ID
	for i := range 20 {
		id, data := blockstest.Block(uint64(i), 3000)
		if err := s.Put(t.Context(), id, data); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	flipByte(t, blockFile(dir, ids[3]), 0)
	flipByte(t, blockFile(dir, ids[17]), 2999)
	st, err := s.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Blocks != 18 || st.Bytes != 18*3000 || len(st.Corrupt) != 2 {
		t.Fatalf("Verify = %+v", st)
	}
	for _, id := range []blocks.ID{ids[3], ids[17]} {
		if ok, _ := s.Has(t.Context(), id); ok {
			t.Errorf("corrupt block %s still held", id.Short())
		}
	}
	if n, _ := s.Usage(); n != 18 {
		t.Fatalf("Usage after Verify: %d blocks", n)
	}
}

func TestDiskReopenCleansTempFiles(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	id, data := blockstest.Block(1, 5000)
	if err := s.Put(t.Context(), id, data); err != nil {
		t.Fatal(err)
	}
	if err := s.Pin("job", id); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// What a crash mid-Put or mid-Pin leaves behind.
	stale := []string{
		filepath.Join(dir, "blocks", id.String()[:2], ".tmp-"+id.String()+"-0123456789abcdef"),
		filepath.Join(dir, "blocks", "ff", ".tmp-whatever"),
		filepath.Join(dir, "pins", ".tmp-job-00"),
	}
	for _, p := range stale {
		// Fan-out directories are made when first needed.
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data[:100], 0o444); err != nil {
			t.Fatal(err)
		}
	}
	// Quarantined files are kept for a week.
	oldQ := fmt.Sprintf("%s.%d", id, time.Now().Add(-8*24*time.Hour).UnixNano())
	newQ := fmt.Sprintf("%s.%d", id, time.Now().Add(-6*24*time.Hour).UnixNano())
	for _, name := range []string{oldQ, newQ} {
		if err := os.WriteFile(filepath.Join(dir, "quarantine", name), data, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	s = openDisk(t, dir, blocks.DiskOptions{})
	if q := quarantined(t, dir); len(q) != 1 || q[0] != newQ {
		t.Fatalf("quarantine after reopen = %v, want only the recent file", q)
	}
	if left := tempFiles(t, dir); len(left) != 0 {
		t.Fatalf("temp files left after reopen: %v", left)
	}
	if n, size := s.Usage(); n != 1 || size != 5000 {
		t.Fatalf("Usage after reopen = %d, %d", n, size)
	}
	if got, err := s.Get(t.Context(), id); err != nil || string(got) != string(data) {
		t.Fatalf("Get after reopen: %v", err)
	}
	if !s.Pinned(id) || fmt.Sprint(s.Pins()) != "[job]" {
		t.Fatalf("pins after reopen: %v", s.Pins())
	}
}

func TestDiskLock(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	if _, err := blocks.OpenDisk(dir, blocks.DiskOptions{}); err == nil {
		t.Fatal("a second OpenDisk of the same directory succeeded")
	}
	s.Close()
	openDisk(t, dir, blocks.DiskOptions{})
}

func TestDiskFilePermissions(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	id, data := blockstest.Block(1, 10)
	if err := s.Put(t.Context(), id, data); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(blockFile(dir, id))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o444 {
		t.Fatalf("block file mode %v, want read-only", fi.Mode())
	}
}

const crashEnv = "P2PC_BLOCKS_CRASH_CHILD"

// TestCrashChild is the child of TestCrashConsistency: it puts blocks (and
// pins) in a loop, printing each ID once Put has returned, until killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("child process of TestCrashConsistency")
	}
	s, err := blocks.OpenDisk(dir, blocks.DiskOptions{})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	var mu sync.Mutex // guards stdout
	fmt.Println("READY")
	seed := uint64(time.Now().UnixNano())
	for w := range uint64(3) {
		go func() {
			for i := w; ; i += 3 {
				id, data := blockstest.Block(seed+i, 1+int((seed+i)%(256<<10)))
				if err := s.Put(t.Context(), id, data); err != nil {
					fmt.Println("ERROR", err)
					os.Exit(2)
				}
				if i%10 == 0 {
					if err := s.Pin(fmt.Sprintf("p%d", i%3), id); err != nil {
						fmt.Println("ERROR", err)
						os.Exit(2)
					}
				}
				mu.Lock()
				fmt.Println(id)
				mu.Unlock()
			}
		}()
	}
	select {} // until killed
}

// TestCrashConsistency SIGKILLs a real process in the middle of writing
// blocks, then checks that the store it leaves behind holds only complete,
// verified blocks, including every block whose Put had returned.
//
// SIGKILL tests the process-crash half of crash consistency: the kernel
// keeps what was written. The power-loss half rests on the fsyncs, which
// this test cannot observe.
func TestCrashConsistency(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		t.Skip("in the child")
	}
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	dir := t.TempDir()
	acked := make(map[blocks.ID]bool)
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() || sc.Text() != "READY" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child did not start: %q", sc.Text())
		}
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		time.Sleep(time.Duration(20+rand.IntN(300)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		n := 0
		for line := range lines {
			if strings.HasPrefix(line, "ERROR") {
				t.Fatalf("child: %s", line)
			}
			id, err := blocks.ParseID(line)
			if err != nil {
				continue // a line cut by the kill
			}
			acked[id] = true
			n++
		}
		cmd.Wait()
		t.Logf("round %d: child acknowledged %d blocks before SIGKILL and left %d temp files",
			round, n, len(tempFiles(t, dir)))

		s, err := blocks.OpenDisk(dir, blocks.DiskOptions{Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("reopen after crash: %v", err)
		}
		if left := tempFiles(t, dir); len(left) != 0 {
			t.Fatalf("temp files survive reopen: %v", left)
		}
		if q := quarantined(t, dir); len(q) != 0 {
			t.Fatalf("reopen after crash quarantined %v", q) // e.g. a torn pin file
		}
		if len(s.Pins()) == 0 && n > 30 {
			t.Fatalf("no pins after %d blocks", n)
		}
		st, err := s.Verify(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Corrupt) != 0 {
			t.Fatalf("round %d: %d corrupt blocks after crash: %v", round, len(st.Corrupt), st.Corrupt)
		}
		if nb, bytes := s.Usage(); nb != st.Blocks || bytes != st.Bytes {
			t.Fatalf("Usage %d/%d, Verify saw %d/%d", nb, bytes, st.Blocks, st.Bytes)
		}
		for id := range acked {
			if ok, _ := s.Has(t.Context(), id); !ok {
				t.Fatalf("block %s acknowledged before the crash is gone", id.Short())
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDiskFull fills a 2 MiB tmpfs: the Put that does not fit fails with
// ENOSPC, leaves no temp file and no partial block, and the store keeps
// working once space is freed. Needs root (mount); skipped otherwise.
func TestDiskFull(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	s := openDisk(t, filepath.Join(mnt, "store"), blocks.DiskOptions{})
	var held []blocks.ID
	var putErr error
	for i := range 100 {
		id, data := blockstest.Block(uint64(i), 300<<10)
		if putErr = s.Put(t.Context(), id, data); putErr != nil {
			break
		}
		held = append(held, id)
	}
	if putErr == nil {
		t.Fatal("30 MB fit in a 2 MiB tmpfs")
	}
	if !errors.Is(putErr, syscall.ENOSPC) {
		t.Fatalf("Put on a full disk = %v, want ENOSPC", putErr)
	}
	if !strings.HasPrefix(putErr.Error(), "put block ") {
		t.Errorf("error %q does not name the operation", putErr)
	}
	t.Logf("disk full after %d blocks: %v", len(held), putErr)
	if left := tempFiles(t, mnt); len(left) != 0 {
		t.Fatalf("temp files left after ENOSPC: %v", left)
	}
	st, err := s.Verify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Blocks != len(held) || len(st.Corrupt) != 0 {
		t.Fatalf("after ENOSPC: Verify = %+v, want %d good blocks", st, len(held))
	}
	if n, _ := s.Usage(); n != len(held) {
		t.Fatalf("Usage counts %d blocks, %d held", n, len(held))
	}
	// Free space and carry on.
	for _, id := range held[:2] {
		if err := s.Delete(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	id, data := blockstest.Block(1000, 300<<10)
	if err := s.Put(t.Context(), id, data); err != nil {
		t.Fatalf("Put after freeing space: %v", err)
	}
	// ENOSPC while writing a pin file: the old pin survives intact.
	if err := s.Pin("job", held[2]); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		id, data := blockstest.Block(uint64(2000+i), 64<<10)
		if err := s.Put(t.Context(), id, data); err != nil {
			break
		}
	}
	many := make([]blocks.ID, 50_000) // a 3 MB pin file cannot fit
	for i := range many {
		many[i] = blocks.Sum([]byte(fmt.Sprint(i)))
	}
	if err := s.Pin("job", many...); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Pin on a full disk = %v, want ENOSPC", err)
	}
	if left := tempFiles(t, mnt); len(left) != 0 {
		t.Fatalf("temp files left after ENOSPC in Pin: %v", left)
	}
	if s.Pinned(many[0]) || !s.Pinned(held[2]) {
		t.Fatal("failed Pin changed the pin")
	}
}

// Fan-out directories are made when a block first needs one, and Has
// answers for IDs whose directory does not exist yet.
func TestDiskFanoutMadeOnFirstUse(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	fanouts := func() []string { return dirNames(t, filepath.Join(dir, "blocks")) }
	if f := fanouts(); len(f) != 0 {
		t.Fatalf("fresh store has fan-out directories %v", f)
	}
	data := []byte("first block")
	id := blocks.Sum(data)
	if has, err := s.Has(t.Context(), id); err != nil || has {
		t.Fatalf("Has before Put = %v, %v", has, err)
	}
	if err := s.Put(t.Context(), id, data); err != nil {
		t.Fatal(err)
	}
	if f := fanouts(); len(f) != 1 || f[0] != id.String()[:2] {
		t.Fatalf("fan-out directories after one Put = %v, want [%s]", f, id.String()[:2])
	}
	if has, err := s.Has(t.Context(), id); err != nil || !has {
		t.Fatalf("Has after Put = %v, %v", has, err)
	}
	s.Close()
	s = openDisk(t, dir, blocks.DiskOptions{})
	if has, err := s.Has(t.Context(), id); err != nil || !has {
		t.Fatalf("Has after reopen = %v, %v", has, err)
	}
	if n, _ := s.Usage(); n != 1 {
		t.Fatalf("Usage after reopen = %d blocks, want 1", n)
	}
}
