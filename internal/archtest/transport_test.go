package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// socketCalls are the functions and types of package net (and crypto/tls)
// that open stream sockets: only internal/transport uses them, everyone
// else listens and dials through its registry. UDP (mDNS, the route
// lookup in transport.LocalIPFor) is not a transport and not listed.
var socketCalls = map[string][]string{
	"net":        {"Listen", "ListenTCP", "ListenUnix", "Dial", "DialTCP", "DialUnix", "DialTimeout", "Dialer", "ListenConfig", "FileListener"},
	"crypto/tls": {"Dial", "DialWithDialer", "Listen", "Dialer"},
}

// socketExempt are the packages that may open sockets themselves: the
// transport, and the harness, which dials peers inside network
// namespaces of a lab to attack them.
func socketExempt(path string) bool {
	return under(path, "internal/transport") || under(path, "harness")
}

// socketUses returns the uses of socketCalls in the Go file at path,
// "file:line: pkg.Name" each.
func socketUses(path string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	names := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		ip, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := socketCalls[ip]; !ok {
			continue
		}
		name := ip[strings.LastIndex(ip, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = ip
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		if ip, ok := names[x.Name]; ok && slices.Contains(socketCalls[ip], sel.Sel.Name) {
			out = append(out, fmt.Sprintf("%s: %s.%s", fset.Position(sel.Pos()), x.Name, sel.Sel.Name))
		}
		return true
	})
	return out, nil
}

func TestSocketUses(t *testing.T) {
	src := `package p

import (
	"net"
	xtls "crypto/tls"
)

func f() {
	net.Listen("tcp", ":0")
	var d net.Dialer
	_ = d
	xtls.Dial("tcp", "h:1", nil)
	net.DialUDP("udp4", nil, nil)
	net.SplitHostPort("h:1")
}
`
	got, err := socketUses("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"p.go:9:2: net.Listen", "p.go:10:8: net.Dialer", "p.go:12:2: xtls.Dial"}
	if !slices.Equal(got, want) {
		t.Errorf("uses = %q, want %q", got, want)
	}
}

// TestOnlyTransportOpensSockets: no production package outside
// internal/transport (and the harness) listens or dials a stream socket
// itself.
func TestOnlyTransportOpensSockets(t *testing.T) {
	var bad []string
	for _, p := range list(t) {
		if socketExempt(p.Path) {
			continue
		}
		for _, file := range p.Files {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			uses, err := socketUses(filepath.Join(p.Path, filepath.Base(file)), src)
			if err != nil {
				t.Fatal(err)
			}
			bad = append(bad, uses...)
		}
	}
	if len(bad) > 0 {
		t.Errorf("sockets opened outside internal/transport (listen and dial through transport.Registry):\n%s", strings.Join(bad, "\n"))
	}
}
