package spec

import "testing"

func TestNeedUpstream(t *testing.T) {
	for _, c := range []struct {
		need       Need
		i, up      int
		wantLo, hi int
	}{
		{Need{Kind: EdgeAll}, 3, 6, 0, 6},
		{Need{Kind: EdgeEach}, 3, 6, 3, 4},
		{Need{Kind: EdgeGroup, Group: 4}, 0, 10, 0, 4},
		{Need{Kind: EdgeGroup, Group: 4}, 2, 10, 8, 10},
	} {
		lo, hi := c.need.Upstream(c.i, c.up)
		if lo != c.wantLo || hi != c.hi {
			t.Errorf("%+v.Upstream(%d, %d) = [%d, %d), want [%d, %d)", c.need, c.i, c.up, lo, hi, c.wantLo, c.hi)
		}
	}
}
