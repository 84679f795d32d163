package outputs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/plugins/sdk"
)

// DigestInline (and DigestInlineAll, in both listing versions) must
// agree with Digest (DigestAll) of the same output on disk.
func TestDigestInlineMatchesDigest(t *testing.T) {
	for _, data := range [][]byte{nil, {}, []byte("hello"), make([]byte, 100000)} {
		work, stage := t.TempDir(), filepath.Join(t.TempDir(), "stage")
		if err := Gather(work, stage, &sdk.Result{Data: data}); err != nil {
			t.Fatal(err)
		}
		want, _, err := Digest(stage)
		if err != nil {
			t.Fatal(err)
		}
		if got := DigestInline(data); got != want {
			t.Errorf("data %d bytes (nil %v): inline %s, on disk %s", len(data), data == nil, got, want)
		}
		all, _, err := DigestAll(stage)
		if err != nil {
			t.Fatal(err)
		}
		if got := DigestInlineAll(data); got != all || all.ID != want {
			t.Errorf("data %d bytes (nil %v): inline %+v, on disk %+v", len(data), data == nil, got, all)
		}
		os.RemoveAll(stage)
	}
}

// Two different sets of files share one listing of version 1 when a name
// holds a newline and the text of a second line: "a\n<sha of y> 1 b"
// holding x against a = x, b = y. Version 2 tells them apart, and a name
// with a control character is refused outright, on disk and in Gather.
func TestListingUnambiguous(t *testing.T) {
	x, y := []byte("x"), []byte("y")
	forged := "a\n" + digest.Sum(y).String() + " 1 b"
	honest := []entry{{"a", 1, digest.Sum(x)}, {"b", 1, digest.Sum(y)}}
	liar := []entry{{forged, 1, digest.Sum(x)}}
	if listing(honest, true) != listing(liar, true) {
		t.Fatal("the version 1 collision does not reproduce: the test shows nothing")
	}
	if listing(honest, false) == listing(liar, false) {
		t.Error("version 2 listings of different files share a digest")
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, forged), x, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Digest(dir); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("Digest of a name with a newline: %v, want a refusal", err)
	}
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, forged), x, 0o644); err != nil {
		t.Fatal(err)
	}
	var te *sdk.TaskError
	if err := Gather(work, filepath.Join(t.TempDir(), "stage"), &sdk.Result{Files: []string{forged}}); !errors.As(err, &te) || !strings.Contains(te.Msg, "control character") {
		t.Errorf("Gather of a name with a newline: %v, want a task error", err)
	}

	// The listing of version 2, spelled out.
	good := t.TempDir()
	os.WriteFile(filepath.Join(good, "a"), x, 0o644)
	os.WriteFile(filepath.Join(good, "b"), y, 0o644)
	d, names, err := DigestAll(good)
	if err != nil {
		t.Fatal(err)
	}
	want := digest.Sum([]byte(digest.Sum(x).String() + " 1 1:a\n" + digest.Sum(y).String() + " 1 1:b\n"))
	legacy := digest.Sum([]byte(digest.Sum(x).String() + " 1 a\n" + digest.Sum(y).String() + " 1 b\n"))
	if d.ID != want || d.Legacy != legacy || len(names) != 2 {
		t.Errorf("DigestAll = %+v %v, want %s and legacy %s", d, names, want, legacy)
	}
}
