package blocks_test

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/p2pc/p2pc/internal/blocks"
	"github.com/p2pc/p2pc/internal/blocks/blockstest"
)

func TestBatch(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	held, heldData := blockstest.Block(100, 3000)
	if err := s.Put(t.Context(), held, heldData); err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	want := map[blocks.ID]bool{held: true}
	for i := range 40 {
		id, data := blockstest.Block(uint64(i), 1+i*1000)
		v, err := blocks.Verify(id, data)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Put(t.Context(), v); err != nil {
			t.Fatal(err)
		}
		if err := b.Put(t.Context(), v); err != nil { // twice: once in the batch
			t.Fatal(err)
		}
		want[id] = true
		// Not a block before Commit: only a temporary file.
		if ok, _ := s.Has(t.Context(), id); ok {
			t.Fatalf("block %d held before Commit", i)
		}
	}
	v, _ := blocks.Verify(held, heldData)
	if err := b.Put(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	if n := b.Len(); n != 41 {
		t.Fatalf("Len = %d, want 41", n)
	}
	if len(tempFiles(t, dir)) != 40 {
		t.Fatalf("%d temp files before Commit, want 40", len(tempFiles(t, dir)))
	}
	ids, err := b.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(want) {
		t.Fatalf("Commit returned %d IDs, want %d (the held block included)", len(ids), len(want))
	}
	for _, id := range ids {
		if !want[id] {
			t.Fatalf("Commit returned %s, never put", id.Short())
		}
		if ok, _ := s.Has(t.Context(), id); !ok {
			t.Fatalf("block %s missing after Commit", id.Short())
		}
	}
	if left := tempFiles(t, dir); len(left) != 0 {
		t.Fatalf("temp files after Commit: %v", left)
	}
	st, err := s.Verify(t.Context())
	if err != nil || st.Blocks != 41 || len(st.Corrupt) != 0 {
		t.Fatalf("Verify = %+v, %v", st, err)
	}
	if n, bytes := s.Usage(); n != st.Blocks || bytes != st.Bytes {
		t.Fatalf("Usage %d/%d, Verify %d/%d", n, bytes, st.Blocks, st.Bytes)
	}
	if ids, err := b.Commit(); err != nil || len(ids) != 0 {
		t.Fatalf("empty Commit = %v, %v", ids, err)
	}

	// Abort leaves nothing.
	id, data := blockstest.Block(999, 100)
	v, _ = blocks.Verify(id, data)
	if err := b.Put(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	b.Abort()
	if ok, _ := s.Has(t.Context(), id); ok || len(tempFiles(t, dir)) != 0 {
		t.Fatal("Abort left the block or its temp file")
	}
}

// TestVerifyRejects: Verify is the only way to a Verified, and it hashes.
func TestVerifyRejects(t *testing.T) {
	id, data := blockstest.Block(1, 100)
	if _, err := blocks.Verify(id, data[1:]); !errors.Is(err, blocks.ErrCorrupt) {
		t.Fatalf("Verify(wrong bytes) = %v, want ErrCorrupt", err)
	}
	big := make([]byte, blocks.MaxBlockSize+1)
	if _, err := blocks.Verify(blocks.Sum(big), big); !errors.Is(err, blocks.ErrTooLarge) {
		t.Fatalf("Verify(too large) = %v, want ErrTooLarge", err)
	}
	v, err := blocks.Verify(id, data)
	if err != nil || v.ID() != id || v.Len() != 100 {
		t.Fatalf("Verify = %v, %v", v, err)
	}
	for _, s := range []blocks.Store{blocks.NewMemStore(), openDisk(t, t.TempDir(), blocks.DiskOptions{})} {
		if err := blocks.PutVerified(t.Context(), s, v); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(t.Context(), id); err != nil || string(got) != string(data) {
			t.Fatalf("%T: Get after PutVerified: %v", s, err)
		}
	}
}

// TestReadBlockCRC: a disk store's ReadBlock checks the CRC32C recorded
// with the block, falls back to SHA-256 without one, and quarantines a
// damaged block as Get does; a damaged attribute alone costs a re-hash,
// not the block.
func TestReadBlockCRC(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	var ids []blocks.ID
	var datas [][]byte
	for i := range 4 {
		id, data := blockstest.Block(uint64(i), 5000)
		if err := s.Put(t.Context(), id, data); err != nil {
			t.Fatal(err)
		}
		ids, datas = append(ids, id), append(datas, data)
	}
	var crc [8]byte
	n, err := unix.Getxattr(blockFile(dir, ids[0]), "user.p2pc.crc32c", crc[:])
	if errors.Is(err, unix.ENOTSUP) {
		t.Skip("no user extended attributes here")
	}
	if err != nil || n != 4 {
		t.Fatalf("crc32c attribute: %d bytes, %v", n, err)
	}
	buf := make([]byte, 0, 8192)
	got, err := s.ReadBlock(t.Context(), ids[0], buf)
	if err != nil || string(got) != string(datas[0]) || &got[0] != &buf[:1][0] {
		t.Fatalf("ReadBlock = %d bytes, %v (or not into buf)", len(got), err)
	}

	flipByte(t, blockFile(dir, ids[1]), 4000) // bit rot
	if _, err := s.ReadBlock(t.Context(), ids[1], nil); !errors.Is(err, blocks.ErrCorrupt) {
		t.Fatalf("ReadBlock(rotten) = %v, want ErrCorrupt", err)
	}
	if ok, _ := s.Has(t.Context(), ids[1]); ok {
		t.Fatal("rotten block not quarantined")
	}

	makeWritable(t, blockFile(dir, ids[2])) // xattrs of a read-only file are too
	if err := unix.Removexattr(blockFile(dir, ids[2]), "user.p2pc.crc32c"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadBlock(t.Context(), ids[2], nil); err != nil || string(got) != string(datas[2]) {
		t.Fatalf("ReadBlock(no crc) = %v", err)
	}
	flipByte(t, blockFile(dir, ids[2]), 0) // flipByte makes it writable
	if _, err := s.ReadBlock(t.Context(), ids[2], nil); !errors.Is(err, blocks.ErrCorrupt) {
		t.Fatalf("ReadBlock(rotten, no crc) = %v, want ErrCorrupt", err)
	}

	if err := os.Chmod(blockFile(dir, ids[3]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(blockFile(dir, ids[3]), "user.p2pc.crc32c", []byte{1, 2, 3, 4}, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ReadBlock(t.Context(), ids[3], nil); err != nil || string(got) != string(datas[3]) {
		t.Fatalf("ReadBlock(good bytes, wrong crc) = %v", err)
	}
	if q := quarantined(t, dir); len(q) != 2 {
		t.Fatalf("quarantine holds %v, want the two rotten blocks", q)
	}
}

const batchCrashEnv = "P2PC_BLOCKS_BATCH_CRASH_CHILD"

// TestBatchCrashChild is the child of TestBatchCrashConsistency: two
// goroutines put blocks into one Batch, a third commits it every few
// milliseconds and prints the IDs Commit returned, until killed.
func TestBatchCrashChild(t *testing.T) {
	dir := os.Getenv(batchCrashEnv)
	if dir == "" {
		t.Skip("child process of TestBatchCrashConsistency")
	}
	s, err := blocks.OpenDisk(dir, blocks.DiskOptions{})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(2)
	}
	b := s.NewBatch()
	fmt.Println("READY")
	seed := uint64(time.Now().UnixNano())
	var wg sync.WaitGroup
	for w := range uint64(2) {
		wg.Go(func() {
			for i := w; ; i += 2 {
				id, data := blockstest.Block(seed+i, 1+int((seed+i)%(512<<10)))
				v, _ := blocks.Verify(id, data)
				if err := b.Put(t.Context(), v); err != nil {
					fmt.Println("ERROR", err)
					os.Exit(2)
				}
			}
		})
	}
	for {
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
		ids, err := b.Commit()
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(2)
		}
		for _, id := range ids {
			fmt.Println(id)
		}
	}
}

// TestBatchCrashConsistency SIGKILLs a process in the middle of batched
// writes and commits, then checks the rule of Batch: what the reopened
// store lists is complete and verified, every block a Commit had returned
// is there, and the blocks written but not committed left nothing but
// temporary files, which the reopen removes.
func TestBatchCrashConsistency(t *testing.T) {
	if os.Getenv(batchCrashEnv) != "" {
		t.Skip("in the child")
	}
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	dir := t.TempDir()
	acked := make(map[blocks.ID]bool)
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBatchCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), batchCrashEnv+"="+dir)
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
		time.Sleep(time.Duration(50+rand.IntN(300)) * time.Millisecond)
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
		temps := len(tempFiles(t, dir))
		s, err := blocks.OpenDisk(dir, blocks.DiskOptions{Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("reopen after crash: %v", err)
		}
		if left := tempFiles(t, dir); len(left) != 0 {
			t.Fatalf("temp files survive reopen: %v", left)
		}
		st, err := s.Verify(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: %d blocks committed before SIGKILL, %d uncommitted temp files; store holds %d",
			round, n, temps, st.Blocks)
		if len(st.Corrupt) != 0 {
			t.Fatalf("round %d: %d corrupt blocks after crash: %v", round, len(st.Corrupt), st.Corrupt)
		}
		if nb, bytes := s.Usage(); nb != st.Blocks || bytes != st.Bytes {
			t.Fatalf("Usage %d/%d, Verify saw %d/%d", nb, bytes, st.Blocks, st.Bytes)
		}
		for id := range acked {
			if ok, _ := s.Has(t.Context(), id); !ok {
				t.Fatalf("block %s committed before the crash is gone", id.Short())
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no Commit returned in any round")
	}
}
