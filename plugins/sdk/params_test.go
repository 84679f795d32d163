package sdk

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type Inner struct {
	Seed int `json:"seed"`
}

type strictParams struct {
	Inner
	Row   int               `json:"row"`
	Name  string            `json:"name,omitempty"`
	Scale float64           `json:"scale,omitzero"`
	Tags  map[string]string `json:"tags,omitempty"`
	Skip  int               `json:"-"`
	Plain int
	Sub   struct {
		A int `json:"a"`
	} `json:"sub,omitempty"`
	hidden int // unexported: never required
}

var _ = strictParams{}.hidden

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name, params string
		wantErr      string // "" for success
	}{
		{"all required keys", `{"seed":1,"row":2,"Plain":3}`, ""},
		{"optional keys too", `{"seed":1,"row":2,"Plain":3,"name":"x","scale":2,"tags":{"k":"v"},"sub":{"a":1}}`, ""},
		{"keys ignoring case", `{"Seed":1,"ROW":2,"plain":3}`, ""},
		{"unknown key", `{"seed":1,"row":2,"Plain":3,"rows":4}`, `unknown field "rows"`},
		{"unknown nested key", `{"seed":1,"row":2,"Plain":3,"sub":{"b":1}}`, `unknown field "b"`},
		{"missing keys", `{"row":2}`, "missing keys seed, Plain"},
		{"no params", ``, "missing keys seed, row, Plain"},
		{"wrong type", `{"seed":"x","row":2,"Plain":3}`, "cannot unmarshal"},
		{"not an object", `[1]`, "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p strictParams
			req := &Request{TaskID: "0007", Params: json.RawMessage(tt.params)}
			err := req.DecodeStrict(&p)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("DecodeStrict(%s): %v", tt.params, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "task 0007")):
				t.Fatalf("DecodeStrict(%s) = %v, want an error of task 0007 with %q", tt.params, err, tt.wantErr)
			}
			// Decode stays lenient: unknown and missing keys are fine.
			if tt.wantErr == "" || strings.Contains(tt.wantErr, "unknown") || strings.Contains(tt.wantErr, "missing") {
				if err := req.Decode(&strictParams{}); err != nil {
					t.Fatalf("Decode(%s): %v", tt.params, err)
				}
			}
		})
	}
	var m map[string]int
	if err := (&ReduceRequest{Params: json.RawMessage(`{"a":1}`)}).DecodeStrict(&m); err != nil || m["a"] != 1 {
		t.Fatalf("DecodeStrict into a map: %v %v", m, err)
	}
}

func TestTaskOutputReadFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "d"), []byte("inline"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := TaskOutput{TaskID: "0001", Files: []File{{Name: DataFile, Path: filepath.Join(dir, "d")}, {Name: "gone.png", Path: filepath.Join(dir, "gone")}}}
	if b, err := out.Data(); err != nil || string(b) != "inline" {
		t.Fatalf("Data() = %q, %v", b, err)
	}
	if _, err := out.ReadFile("nope"); err == nil || !strings.Contains(err.Error(), `task 0001 has no output file "nope"`) {
		t.Fatalf("ReadFile(nope) = %v", err)
	}
	if _, err := out.ReadFile("gone.png"); err == nil || !strings.Contains(err.Error(), "task 0001") {
		t.Fatalf("ReadFile(gone.png) = %v", err)
	}
}
