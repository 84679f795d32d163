package digest

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	hello := sha256.Sum256([]byte("hello"))
	for _, c := range []struct {
		in   string
		want ID
		err  string
	}{
		{"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", hello, ""},
		{"2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824", hello, ""},
		{"2cf24dba", ID{}, "want 64 hex digits, got 8"},
		{strings.Repeat("zz", 32), ID{}, "invalid byte"},
		{"", ID{}, "got 0"},
	} {
		got, err := Parse(c.in)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) || got != c.want {
			t.Errorf("Parse(%q) = %v, %v; want %v, %q", c.in, got, err, c.want, c.err)
		}
	}
}

func TestForms(t *testing.T) {
	id := Sum([]byte("hello"))
	if id.String() != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" || id.Short() != "2cf24dba" || id.IsZero() || !(ID{}).IsZero() {
		t.Errorf("forms of %v: %s %s", id, id.String(), id.Short())
	}
	data, err := json.Marshal(map[string]ID{"id": id})
	if err != nil || string(data) != `{"id":"`+id.String()+`"}` {
		t.Fatalf("JSON %s, %v", data, err)
	}
	var back map[string]ID
	if err := json.Unmarshal(data, &back); err != nil || back["id"] != id {
		t.Errorf("JSON round trip %v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"id":"beef"}`), &back); err == nil {
		t.Error("a short JSON ID decoded")
	}
	if b, err := FromBytes(id[:]); err != nil || b != id {
		t.Errorf("FromBytes %v, %v", b, err)
	}
	if _, err := FromBytes(id[:5]); err == nil {
		t.Error("FromBytes took 5 bytes")
	}
}

func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	data := []byte(strings.Repeat("p2pc", 100000))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := File(path); err != nil || got != Sum(data) {
		t.Errorf("File = %v, %v; want %v", got, err, Sum(data))
	}
	if _, err := File(path + ".missing"); err == nil || !strings.Contains(err.Error(), "digest ") {
		t.Errorf("missing file: %v", err)
	}
}
