package discovery

import (
	"context"
	"strings"
	"testing"
)

func TestParseAddrs(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: nil},
		{in: "127.0.0.1:7000", want: []string{"127.0.0.1:7000"}},
		{in: " a:1 , b:2,a:1 ", want: []string{"a:1", "b:2"}},
		{in: "[::1]:9", want: []string{"[::1]:9"}},
		{in: "127.0.0.1", wantErr: "peer address 1"},
		{in: "a:1,b:0", wantErr: `peer address 2 "b:0": port must be 1-65535`},
		{in: ":80", wantErr: "missing host"},
		{in: "a:http", wantErr: "port must be"},
	}
	for _, tt := range tests {
		got, err := ParseAddrs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseAddrs(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseAddrs(%q): %v", tt.in, err)
			continue
		}
		peers, _ := got.Find(context.Background())
		var addrs []string
		for _, p := range peers {
			addrs = append(addrs, p.Addr)
		}
		if strings.Join(addrs, ",") != strings.Join(tt.want, ",") {
			t.Errorf("ParseAddrs(%q) = %v, want %v", tt.in, addrs, tt.want)
		}
	}
}
