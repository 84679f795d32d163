package swarmjobs

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/p2pc/p2pc/internal/dirlock"
	pb "github.com/p2pc/p2pc/internal/swarmjobs/swarmjobspb"
)

// Kinds of bundle (Header.kind).
const (
	KindJob     = "job"
	KindResults = "results"
)

// Names of a job bundle's files.
const (
	SpecFile   = "spec.yaml"
	PluginFile = "plugin"
	InputsDir  = "inputs"
)

// chunk is the size of a Data message.
const chunk = 256 << 10

// File is a file of a bundle: Rel is its slash-separated path in the
// bundle, Path where it is read from.
type File struct {
	Rel  string
	Path string
}

// DirFiles lists the regular files under dir, sorted, leaving out the
// output folder's lock (a copy never carries it).
func DirFiles(dir string) ([]File, error) {
	var out []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || d.Name() == dirlock.FileName {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out = append(out, File{Rel: filepath.ToSlash(rel), Path: p})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Rel, b.Rel) })
	return out, nil
}

// sendBundle sends h, then each file (its head, then its bytes).
func sendBundle(send func(*pb.Bundle) error, h *pb.Header, files []File) error {
	if err := send(&pb.Bundle{Msg: &pb.Bundle_Header{Header: h}}); err != nil {
		return fmt.Errorf("send header: %w", err)
	}
	buf := make([]byte, chunk)
	for _, f := range files {
		if err := sendFile(send, f, buf); err != nil {
			return err
		}
	}
	return nil
}

func sendFile(send func(*pb.Bundle) error, f File, buf []byte) error {
	sum, size, mode, err := fileSum(f.Path)
	if err != nil {
		return err
	}
	if err := send(&pb.Bundle{Msg: &pb.Bundle_File{File: &pb.FileHead{Path: f.Rel, Size: size, Sha256: sum, Mode: mode}}}); err != nil {
		return fmt.Errorf("send %s: %w", f.Rel, err)
	}
	r, err := os.Open(f.Path)
	if err != nil {
		return fmt.Errorf("send %s: %w", f.Rel, err)
	}
	defer r.Close()
	left := size
	for left > 0 {
		n, err := io.ReadFull(r, buf[:min(int64(len(buf)), left)])
		if err != nil {
			return fmt.Errorf("send %s: read %s: %w", f.Rel, f.Path, err)
		}
		if err := send(&pb.Bundle{Msg: &pb.Bundle_Data{Data: buf[:n]}}); err != nil {
			return fmt.Errorf("send %s: %w", f.Rel, err)
		}
		left -= int64(n)
	}
	return nil
}

func fileSum(path string) (sum []byte, size int64, mode uint32, err error) {
	r, err := os.Open(path)
	if err != nil {
		return nil, 0, 0, err
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil {
		return nil, 0, 0, err
	}
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read %s: %w", path, err)
	}
	if n != fi.Size() {
		return nil, 0, 0, fmt.Errorf("read %s: it changed while read", path)
	}
	return h.Sum(nil), n, uint32(fi.Mode().Perm()), nil
}

// recvHeader reads a bundle's first message, its header.
func recvHeader(recv func() (*pb.Bundle, error)) (*pb.Header, error) {
	m, err := recv()
	if err != nil {
		return nil, fmt.Errorf("receive header: %w", err)
	}
	h := m.GetHeader()
	if h == nil || h.Record == nil {
		return nil, errors.New("the first message of a bundle must be its header, with the job's record")
	}
	return h, nil
}

// recvFiles writes the files of a bundle into dir (which exists), checking
// each file's size and digest, until the stream ends.
func recvFiles(recv func() (*pb.Bundle, error), dir string) error {
	var (
		w    *os.File
		head *pb.FileHead
		left int64
		h    = sha256.New()
	)
	closeFile := func() error {
		if w == nil {
			return nil
		}
		err := w.Close()
		w = nil
		if err != nil {
			return fmt.Errorf("write %s: %w", head.Path, err)
		}
		if left != 0 {
			return fmt.Errorf("file %s: %d bytes missing", head.Path, left)
		}
		if !slices.Equal(h.Sum(nil), head.Sha256) {
			return fmt.Errorf("file %s: its bytes do not match its SHA-256", head.Path)
		}
		return nil
	}
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return closeFile()
		}
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		switch msg := m.Msg.(type) {
		case *pb.Bundle_File:
			if err := closeFile(); err != nil {
				return err
			}
			head = msg.File
			if w, err = createIn(dir, head); err != nil {
				return err
			}
			left = head.Size
			h.Reset()
		case *pb.Bundle_Data:
			d := msg.Data
			if w == nil || int64(len(d)) > left {
				return errors.New("bundle: data beyond the announced file sizes")
			}
			if _, err := w.Write(d); err != nil {
				return fmt.Errorf("write %s: %w", head.Path, err)
			}
			h.Write(d)
			left -= int64(len(d))
		default:
			return errors.New("bundle: a second header, or an empty message")
		}
	}
}

// createIn creates the file of head under dir; its path must stay in dir.
func createIn(dir string, head *pb.FileHead) (*os.File, error) {
	rel := filepath.FromSlash(head.Path)
	if head.Path == "" || !filepath.IsLocal(rel) || head.Size < 0 || len(head.Sha256) != sha256.Size {
		return nil, fmt.Errorf("bundle: bad file head %q (size %d)", head.Path, head.Size)
	}
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	mode := os.FileMode(head.Mode&0o755) | 0o600
	return os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
}

// intoDir receives a bundle's files into a temporary folder beside dst,
// then renames it to dst, replacing a dst that exists.
func intoDir(recv func() (*pb.Bundle, error), dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	if err := recvFiles(recv, tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return replaceDir(tmp, dst)
}

// replaceDir renames tmp to dst; a dst that exists is moved aside first
// and removed after.
func replaceDir(tmp, dst string) error {
	old := ""
	if _, err := os.Lstat(dst); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dst, old); err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		if old != "" {
			os.Rename(old, dst)
		}
		return err
	}
	if old != "" {
		os.RemoveAll(old)
	}
	return nil
}
