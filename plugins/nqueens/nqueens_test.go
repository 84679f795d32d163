package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/p2pc/p2pc/plugins/sdk"
)

// The known counts of solutions (OEIS A000170).
func TestCount(t *testing.T) {
	want := []int{1, 0, 0, 2, 10, 4, 40, 92, 352, 724}
	for n := 1; n <= len(want); n++ {
		if got := count1(n, nil); got != want[n-1] {
			t.Errorf("%d queens: %d solutions, want %d", n, got, want[n-1])
		}
	}
}

// A task with split rows placed counts by itself; a prefix that is no
// solution's is refused.
func TestRunLeaf(t *testing.T) {
	for _, c := range []struct {
		params string
		want   string
	}{
		{`{"n": 8, "split": 0}`, "92"},
		{`{"n": 8, "split": 1, "cols": [0]}`, "4"},
		{`{"n": 6, "split": 2, "cols": [1, 3]}`, "1"},
	} {
		req := &sdk.Request{TaskID: "t", Params: json.RawMessage(c.params), WorkDir: t.TempDir()}
		res, err := queens{}.Run(context.Background(), req, nil)
		if err != nil || string(res.Data) != c.want {
			t.Errorf("%s: %v, %v; want %s", c.params, res, err, c.want)
		}
	}
	req := &sdk.Request{TaskID: "t", Params: json.RawMessage(`{"n": 8, "split": 2, "cols": [0, 1]}`)}
	if _, err := (queens{}).Run(context.Background(), req, nil); err == nil {
		t.Error("an attacked prefix was taken")
	}
}
