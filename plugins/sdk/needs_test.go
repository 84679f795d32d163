package sdk

import (
	"reflect"
	"testing"
)

func TestNeeds(t *testing.T) {
	r := &Request{Inputs: []File{
		{Name: "table.csv", Path: "/in/table.csv"},
		{Name: "needs/square/0000/sq.txt", Path: "/a"},
		{Name: "needs/square/0001/sub/sq.txt", Path: "/b"},
		{Name: "needs/double/0000/d.txt", Path: "/c"},
		{Name: "needs/broken", Path: "/d"},
	}}
	got := r.Needs("square")
	want := []Upstream{
		{Stage: "square", Task: "0000", Name: "sq.txt", File: r.Inputs[1]},
		{Stage: "square", Task: "0001", Name: "sub/sq.txt", File: r.Inputs[2]},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Needs(square) = %+v, want %+v", got, want)
	}
	if all := r.Needs(""); len(all) != 3 || all[2].Stage != "double" {
		t.Errorf("Needs(\"\") = %+v", all)
	}
	if none := r.Needs("nowhere"); len(none) != 0 {
		t.Errorf("Needs(nowhere) = %+v", none)
	}
}
