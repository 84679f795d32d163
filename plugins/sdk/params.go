package sdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
)

// decodeParams unmarshals params into v. Strict, it also rejects keys v
// has no field for and fields of v the params leave out (see
// Request.DecodeStrict).
func decodeParams(params json.RawMessage, v any, strict bool) error {
	if !strict {
		if len(params) == 0 {
			return nil
		}
		return json.Unmarshal(params, v)
	}
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(params, &keys); err != nil {
		return err
	}
	var missing []string
	for _, name := range requiredKeys(reflect.TypeOf(v)) {
		if !hasKey(keys, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing keys %s", strings.Join(missing, ", "))
	}
	return nil
}

// hasKey matches a key as encoding/json does: exactly, else ignoring case.
func hasKey(keys map[string]json.RawMessage, name string) bool {
	if _, ok := keys[name]; ok {
		return true
	}
	for k := range keys {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// requiredKeys lists the JSON names of the fields of the struct t points
// to that are not tagged omitempty (or omitzero), following embedded
// structs as encoding/json does. A type that is not a struct requires
// nothing.
func requiredKeys(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if ft := f.Type; f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, requiredKeys(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero") {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// ReadFile returns the content of the task's output file named name
// (DataFile for the task's inline Data).
func (t *TaskOutput) ReadFile(name string) ([]byte, error) {
	f, ok := t.File(name)
	if !ok {
		return nil, fmt.Errorf("task %s has no output file %q", t.TaskID, name)
	}
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", t.TaskID, err)
	}
	return b, nil
}

// Data returns the task's inline Data (the output file DataFile).
func (t *TaskOutput) Data() ([]byte, error) { return t.ReadFile(DataFile) }
