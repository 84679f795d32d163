package trust

import (
	"strings"
	"testing"
)

func TestUIToken(t *testing.T) {
	a, _ := NewSecret()
	b, _ := NewSecret()
	ta := a.UIToken()
	if ta != a.UIToken() || !strings.HasPrefix(ta, "p2pcui-") {
		t.Fatalf("UIToken %q: not stable or not prefixed", ta)
	}
	if ta == b.UIToken() {
		t.Error("two swarms share a UI token")
	}
	if strings.Contains(ta, a.Token()[len(TokenPrefix):len(TokenPrefix)+10]) || strings.Contains(ta, b32.EncodeToString(a[:])) {
		t.Error("the UI token shows the secret")
	}
	if ta == b32.EncodeToString(a.GossipKey()[:20]) {
		t.Error("the UI token is the gossip key")
	}
}
