package blocks_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/internal/blocks"
)

// wholeFile assembles data (cut into blocks of bs bytes) in s as a whole
// file, the way FetchFile does, linked to dest, and returns its manifest
// and ID.
func wholeFile(t *testing.T, s *blocks.DiskStore, data []byte, bs int, dest string) (*blocks.Manifest, blocks.ID) {
	t.Helper()
	m := &blocks.Manifest{Size: int64(len(data)), BlockSize: bs}
	for off := 0; off < len(data); off += bs {
		m.Blocks = append(m.Blocks, blocks.Sum(data[off:min(off+bs, len(data))]))
	}
	enc := m.Encode()
	file := blocks.Sum(enc)
	if err := s.Put(t.Context(), file, enc); err != nil {
		t.Fatal(err)
	}
	p, err := s.OpenPartial(t.Context(), file, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.File().WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Install(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.LinkFile(file, dest); err != nil {
		t.Fatal(err)
	}
	return m, file
}

func TestWholeFile(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	// Block 10 repeats block 0; a short block ends the file.
	data := slices.Concat(randomBytes(1, 10*4096), randomBytes(1, 4096), randomBytes(5, 100))
	dest := filepath.Join(t.TempDir(), "out")
	m, file := wholeFile(t, s, data, 4096, dest)
	if got, err := os.ReadFile(dest); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("dest: %v", err)
	}
	if !s.HasFile(file) {
		t.Fatal("HasFile = false")
	}
	distinct := len(m.Blocks) - 1
	for i, id := range m.Blocks {
		if ok, _ := s.Has(t.Context(), id); !ok {
			t.Fatalf("Has(block %d) = false", i)
		}
		got, err := s.Get(t.Context(), id)
		if err != nil || !bytes.Equal(got, data[m.Offset(i):m.Offset(i)+int64(m.BlockLen(i))]) {
			t.Fatalf("Get(block %d): %v", i, err)
		}
		if got, err := s.ReadBlock(t.Context(), id, nil); err != nil || len(got) != m.BlockLen(i) {
			t.Fatalf("ReadBlock(block %d): %v", i, err)
		}
	}
	var listed []blocks.ID
	if err := s.List(t.Context(), func(id blocks.ID, _ int64) error { listed = append(listed, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(listed) != distinct+1 || !slices.Contains(listed, file) {
		t.Fatalf("List: %d blocks, want %d and the manifest", len(listed), distinct)
	}
	// Only the manifest is a block file: each byte was written once.
	if n := countBlockFiles(t, dir); n != 1 {
		t.Fatalf("%d block files, want 1", n)
	}
	check := func(wantBlocks int) {
		t.Helper()
		st, err := s.Verify(t.Context())
		if err != nil || len(st.Corrupt) != 0 || st.Blocks != wantBlocks {
			t.Fatalf("Verify = %+v, %v; want %d blocks", st, err, wantBlocks)
		}
		if n, b := s.Usage(); n != st.Blocks || b != st.Bytes {
			t.Fatalf("Usage %d/%d, Verify %d/%d", n, b, st.Blocks, st.Bytes)
		}
	}
	check(distinct + 1)

	// Survives a reopen, and dest is independent of the store's name.
	s.Close()
	if err := os.Remove(dest); err != nil {
		t.Fatal(err)
	}
	s = openDisk(t, dir, blocks.DiskOptions{})
	if !s.HasFile(file) {
		t.Fatal("whole file lost on reopen")
	}
	check(distinct + 1)
	dest2 := filepath.Join(filepath.Dir(dest), "again")
	if err := s.LinkFile(file, dest2); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest2); !bytes.Equal(got, data) {
		t.Fatal("second link differs")
	}

	// A change through the other link is caught on read: the whole file
	// is quarantined, the block reported corrupt, the rest gone with it.
	f, err := os.OpenFile(dest2, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("scribble"), m.Offset(3)+10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := s.Get(t.Context(), m.Blocks[3]); !errors.Is(err, blocks.ErrCorrupt) {
		t.Fatalf("Get(changed block) = %v, want ErrCorrupt", err)
	}
	if s.HasFile(file) {
		t.Fatal("changed whole file still held")
	}
	if ok, _ := s.Has(t.Context(), m.Blocks[0]); ok {
		t.Fatal("blocks of a quarantined whole file still held")
	}
	if q := quarantined(t, dir); len(q) != 1 || !strings.HasPrefix(q[0], "file-"+file.String()+".") {
		t.Fatalf("quarantine holds %v, want file-%s.NANOS", q, file)
	}
	check(1)
}

// TestWholeFileResume: a partial file left by an attempt that stopped is
// found by the next OpenPartial, which verifies what it holds.
func TestWholeFileResume(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	data := randomBytes(2, 8*4096)
	m := &blocks.Manifest{Size: int64(len(data)), BlockSize: 4096}
	for off := 0; off < len(data); off += 4096 {
		m.Blocks = append(m.Blocks, blocks.Sum(data[off:off+4096]))
	}
	file := m.ID()
	p, err := s.OpenPartial(t.Context(), file, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2, 6} {
		p.File().WriteAt(data[i*4096:(i+1)*4096], int64(i)*4096)
	}
	p.File().WriteAt([]byte("torn"), 4*4096) // a block cut by a crash
	// A second OpenPartial of the same file meanwhile gets its own.
	p2, err := s.OpenPartial(t.Context(), file, m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Blocks {
		if p2.InPlace(i) {
			t.Fatalf("concurrent partial shares block %d", i)
		}
	}
	p2.Remove()
	p.Close() // kept, as after a crash
	s.Close()
	s = openDisk(t, dir, blocks.DiskOptions{})
	p, err = s.OpenPartial(t.Context(), file, m)
	if err != nil {
		t.Fatal(err)
	}
	var in []int
	for i := range m.Blocks {
		if p.InPlace(i) {
			in = append(in, i)
		}
	}
	if !slices.Equal(in, []int{1, 2, 6}) {
		t.Fatalf("blocks in place after reopen: %v, want [1 2 6]", in)
	}
	// Partial files are not blocks, and GC takes them when it runs short.
	if n, _ := s.Usage(); n != 0 {
		t.Fatalf("Usage counts a partial file: %d blocks", n)
	}
	p.Close()
	if _, err := s.GC(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if parts, _ := filepath.Glob(filepath.Join(dir, "files", ".part-*")); len(parts) != 0 {
		t.Fatalf("GC(0) left %v", parts)
	}
}

// TestWholeFileDeleteAndGC: Delete of a block held in a whole file keeps
// the file's other blocks (as block files); GC removes unpinned whole
// files and never pinned ones.
func TestWholeFileDeleteAndGC(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir, blocks.DiskOptions{})
	out := t.TempDir()
	dataA, dataB := randomBytes(3, 6*4096), randomBytes(4, 5*4096)
	mA, fileA := wholeFile(t, s, dataA, 4096, filepath.Join(out, "a"))
	mB, fileB := wholeFile(t, s, dataB, 4096, filepath.Join(out, "b"))

	if err := s.Delete(t.Context(), mA.Blocks[2]); err != nil {
		t.Fatal(err)
	}
	if s.HasFile(fileA) {
		t.Fatal("whole file kept after Delete of one of its blocks")
	}
	for i, id := range mA.Blocks {
		ok, _ := s.Has(t.Context(), id)
		if ok != (i != 2) {
			t.Fatalf("after Delete: Has(block %d) = %v", i, ok)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(out, "a")); !bytes.Equal(got, dataA) {
		t.Fatal("Delete changed the destination")
	}

	if err := s.Pin("b", fileB); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if !s.HasFile(fileB) {
		t.Fatal("GC removed a pinned whole file")
	}
	if ok, _ := s.Has(t.Context(), fileB); !ok {
		t.Fatal("GC removed the manifest of a whole file")
	}
	if ok, _ := s.Has(t.Context(), mA.Blocks[0]); ok {
		t.Fatal("GC(0) kept an unpinned block")
	}
	if err := s.Unpin("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GC(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if s.HasFile(fileB) {
		t.Fatal("GC(0) kept an unpinned whole file")
	}
	if ok, _ := s.Has(t.Context(), mB.Blocks[0]); ok {
		t.Fatal("blocks of a collected whole file still held")
	}
	if n, b := s.Usage(); n != 0 || b != 0 {
		t.Fatalf("Usage after GC(0) = %d, %d", n, b)
	}
	if got, _ := os.ReadFile(filepath.Join(out, "b")); !bytes.Equal(got, dataB) {
		t.Fatal("GC changed the destination")
	}
}

func countBlockFiles(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "blocks", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if filepath.Base(f)[0] != '.' {
			n++
		}
	}
	return n
}
