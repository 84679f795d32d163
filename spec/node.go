package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// This file is the YAML layer: it turns bytes into a checked yaml.Node tree
// and offers typed accessors over nodes that report errors with positions.
// yaml.v3 is only used to build the node tree; it never decodes the whole
// document into Go values, so it never expands aliases for us.

// Limits on the shape of a document, checked on the node tree before any
// value is built.
const (
	// MaxDepth is the deepest nesting of lists and mappings allowed,
	// counting the top-level mapping as 1 and following aliases.
	MaxDepth = 32
	// MaxAliases is the largest number of aliases (*name) in a document.
	MaxAliases = 100
	// MaxAliasNodes is the largest number of nodes that aliases may add to
	// a document when each alias is replaced by a copy of its anchor's value.
	MaxAliasNodes = 10000
)

const saturate = int64(1) << 50 // node counts stop growing here

// load checks the raw bytes, parses the single YAML document in them and
// checks its shape. It returns the root node, or nil after reporting errors.
func (p *parser) load(data []byte) *yaml.Node {
	if !p.checkText(data) {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := safeDecode(dec, &doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(1, 1, "spec is empty")
		} else {
			p.syntaxError(err, data)
		}
		return nil
	}
	var next yaml.Node
	switch err := safeDecode(dec, &next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		p.syntaxError(err, data)
		return nil
	default:
		p.add(max(next.Line, 1), max(next.Column, 1), "a spec must hold one YAML document, found a second one here")
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0] == nil {
		p.add(1, 1, "spec is empty")
		return nil
	}
	root := doc.Content[0]
	if !p.checkShape(root) {
		return nil
	}
	return root
}

// safeDecode runs yaml.v3 and turns any panic it raises into an error, so
// that a bug in the YAML library cannot take the caller down with it.
func safeDecode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: internal error: %v", r)
		}
	}()
	return dec.Decode(n)
}

// checkText rejects what the YAML reader would reject without a position:
// invalid UTF-8 and characters YAML does not allow in a stream.
func (p *parser) checkText(data []byte) bool {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			p.add(line, col, "spec is not valid UTF-8 (byte 0x%02x)", data[i])
			return false
		case r == '\n' || r == '\r' && (i+1 == len(data) || data[i+1] != '\n'):
			line, col = line+1, 1
			i += size
			continue
		case r == '\t' || r == '\r' || r == 0x85:
		case r >= 0x20 && r <= 0x7e, r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000:
		default:
			p.add(line, col, "character %U is not allowed in YAML", r)
			return false
		}
		i += size
		col++
	}
	return true
}

// parserProblems are the messages of libyaml's parser (as opposed to its
// scanner). yaml.v3 prints a 0-based line for these and a 1-based line for
// the others.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// syntaxError converts a yaml.v3 error ("yaml: line 3: did not find
// expected key") into a positioned Error. yaml.v3 gives no column, and no
// line at all for problems on the first line.
func (p *parser) syntaxError(err error, data []byte) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line, col := 1, 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, text
				if parserProblems[msg] {
					line++
				}
			}
		}
	}
	// Problems at the end of the stream are put on the last line.
	lines := bytes.Count(bytes.TrimRight(data, "\n"), []byte("\n")) + 1
	line = min(max(line, 1), lines)
	if name, ok := strings.CutPrefix(msg, "unknown anchor '"); ok {
		name = strings.TrimSuffix(name, "' referenced")
		if l, c, ok := findAlias(data, name); ok {
			line, col = l, c
		}
		p.add(line, col, "alias *%s refers to an anchor &%[1]s that is not defined before it", truncate(name))
		return
	}
	p.add(line, col, "YAML syntax error: %s", msg)
}

// findAlias finds the first "*name" in data that is a whole alias token.
func findAlias(data []byte, name string) (line, col int, ok bool) {
	tok := []byte("*" + name)
	for off := 0; ; {
		i := bytes.Index(data[off:], tok)
		if i < 0 {
			return 0, 0, false
		}
		i += off
		end := i + len(tok)
		if end == len(data) || bytes.IndexByte([]byte(" \t\r\n,[]{}"), data[end]) >= 0 {
			line, col = lineCol(data, i)
			return line, col, true
		}
		off = i + 1
	}
}

// lineCol is the 1-based line and column (in characters) of byte offset off.
func lineCol(data []byte, off int) (line, col int) {
	head := data[:off]
	line = bytes.Count(head, []byte("\n")) + 1
	if i := bytes.LastIndexByte(head, '\n'); i >= 0 {
		head = head[i+1:]
	}
	return line, utf8.RuneCount(head) + 1
}

// shape is what checkShape learns about a node: its size and height once
// every alias is replaced by a copy of its anchor's value.
type shape struct {
	size   int64
	height int
}

type shapeChecker struct {
	p       *parser
	memo    map[*yaml.Node]shape // anchored nodes only: the rest is a tree
	open    map[*yaml.Node]bool  // anchored nodes being walked
	aliases int
	added   int64 // nodes added by aliases so far, in document order
	bad     bool  // a problem that makes the tree unsafe to walk
}

// checkShape enforces MaxAliases, MaxAliasNodes and MaxDepth, rejects
// recursive aliases and tags outside the YAML core schema. It visits every
// node of the tree as written once, so it is linear in the document size
// whatever the aliases would expand to.
//
// The document grows by size(anchor)-1 at each alias, where size counts
// nested aliases expanded; summing that in document order finds the alias
// that crosses MaxAliasNodes.
func (p *parser) checkShape(root *yaml.Node) bool {
	c := &shapeChecker{p: p, memo: make(map[*yaml.Node]shape), open: make(map[*yaml.Node]bool)}
	s := c.walk(root)
	if c.bad {
		return false
	}
	if s.height > MaxDepth {
		// Aliases have been bounded, and the search stops below MaxDepth.
		p.errorf(deepest(root, 1), "nesting is deeper than %d levels", MaxDepth)
		return false
	}
	return true
}

func (c *shapeChecker) walk(n *yaml.Node) shape {
	anchored := n.Anchor != ""
	if anchored {
		if s, ok := c.memo[n]; ok {
			return s
		}
	}
	var s shape
	switch n.Kind {
	case yaml.AliasNode:
		c.aliases++
		if c.aliases == MaxAliases+1 {
			c.p.errorf(n, "too many aliases: a spec may use at most %d", MaxAliases)
			c.bad = true
		}
		switch {
		case n.Alias == nil:
			c.p.errorf(n, "alias *%s has no anchor", truncate(n.Value))
			c.bad = true
			s = shape{1, 1}
		case c.open[n.Alias]:
			c.p.errorf(n, "alias *%s refers to a value that contains it", truncate(n.Value))
			c.bad = true
			s = shape{1, 1}
		default:
			s = c.walk(n.Alias)
			before := c.added
			c.added = min(c.added+s.size-1, saturate)
			if before <= MaxAliasNodes && c.added > MaxAliasNodes {
				c.p.errorf(n, "aliases expand the spec by more than %d nodes", MaxAliasNodes)
				c.bad = true
			}
		}
	case yaml.ScalarNode:
		c.checkTag(n)
		s = shape{1, 1}
	case yaml.SequenceNode, yaml.MappingNode:
		c.checkTag(n)
		if anchored {
			c.open[n] = true
		}
		s = shape{1, 0}
		for _, child := range n.Content {
			cs := c.walk(child)
			s.size = min(s.size+cs.size, saturate)
			s.height = max(s.height, cs.height)
		}
		s.height++
		delete(c.open, n)
	default:
		c.p.errorf(n, "unexpected YAML node")
		c.bad = true
		s = shape{1, 1}
	}
	if anchored {
		c.memo[n] = s
	}
	return s
}

// checkTag allows explicit tags of the core schema only.
func (c *shapeChecker) checkTag(n *yaml.Node) {
	if n.Style&yaml.TaggedStyle == 0 {
		return
	}
	switch tag := n.Tag; {
	case n.Kind == yaml.ScalarNode && (tag == "!!str" || tag == "!!int" || tag == "!!float" || tag == "!!bool" || tag == "!!null"):
	case n.Kind == yaml.SequenceNode && tag == "!!seq":
	case n.Kind == yaml.MappingNode && tag == "!!map":
	case tag == "!!str" || tag == "!!int" || tag == "!!float" || tag == "!!bool" || tag == "!!null" || tag == "!!seq" || tag == "!!map":
		c.p.errorf(n, "tag %s cannot be used on %s", tag, kindName(n))
	default:
		c.p.errorf(n, "%s", unsupportedTag(tag))
	}
}

func unsupportedTag(tag string) string {
	return "unsupported tag " + tag + " (allowed: !!str, !!int, !!float, !!bool, !!null, !!seq, !!map)"
}

// deepest returns the first node, in document order, that lies deeper
// than MaxDepth below n (at depth), following aliases; nil if none.
func deepest(n *yaml.Node, depth int) *yaml.Node {
	if depth > MaxDepth {
		return n
	}
	for _, child := range deref(n).Content {
		if d := deepest(child, depth+1); d != nil {
			return d
		}
	}
	return nil
}

// deref follows an alias to its anchored value.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 10; i++ {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a scalar"
}

// describe says what a node is, for "expected X, got Y" messages:
// "!!int 30", `!!str "abc"`, "null", "a list", "a mapping".
func describe(n *yaml.Node) string {
	n = deref(n)
	if n.Kind != yaml.ScalarNode {
		return kindName(n)
	}
	tag := n.ShortTag()
	if tag == "!!null" {
		return "null"
	}
	if tag == "!!str" || strings.ContainsAny(n.Value, " \t\n\r\"") {
		return tag + " " + short(n.Value).String()
	}
	return tag + " " + truncate(n.Value)
}

// short is text from the spec shown in a message: quoted, and cut to 40
// bytes so that a huge key or value cannot flood the output.
type short string

func (s short) String() string { return strconv.Quote(truncate(string(s))) }

func truncate(s string) string {
	if len(s) <= 40 {
		return s
	}
	cut := 40
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func isMerge(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!merge"
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) {
	p.add(max(n.Line, 1), max(n.Column, 1), format, args...)
}

// pair is one entry of a mapping. k is the key node as written (perhaps an
// alias, perhaps inside a merged mapping); v the value node.
type pair struct {
	key  string
	k, v *yaml.Node
}

// pairs returns the entries of mapping m in the order written, with merge
// keys (<<: *base) expanded: explicit keys win over merged ones, and among
// merged mappings the first one listed wins. Duplicate explicit keys and
// keys that are not strings are reported.
func (p *parser) pairs(m *yaml.Node) []pair {
	m = deref(m)
	explicit := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn := m.Content[i]
		k := deref(kn)
		if isMerge(k) {
			continue
		}
		key, ok := p.keyString(kn)
		if !ok {
			continue
		}
		if first, dup := explicit[key]; dup {
			p.errorf(kn, "duplicate key %s (first defined at %d:%d)", short(key), first.Line, first.Column)
			continue
		}
		explicit[key] = kn
	}
	out := make([]pair, 0, len(m.Content)/2)
	merged := make(map[string]bool)
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn, v := m.Content[i], m.Content[i+1]
		if isMerge(deref(kn)) {
			for _, mp := range p.mergeSources(v) {
				if explicit[mp.key] != nil || merged[mp.key] {
					continue
				}
				merged[mp.key] = true
				out = append(out, mp)
			}
			continue
		}
		if key := deref(kn).Value; explicit[key] == kn {
			out = append(out, pair{key, kn, v})
		}
	}
	return out
}

// mergeSources returns the entries a merge key brings in.
func (p *parser) mergeSources(v *yaml.Node) []pair {
	t := deref(v)
	switch t.Kind {
	case yaml.MappingNode:
		return p.pairs(t)
	case yaml.SequenceNode:
		var out []pair
		seen := make(map[string]bool)
		for _, item := range t.Content {
			if deref(item).Kind != yaml.MappingNode {
				p.errorf(item, "merge key << needs a mapping or a list of mappings, got %s in the list", describe(item))
				continue
			}
			for _, mp := range p.pairs(item) {
				if !seen[mp.key] {
					seen[mp.key] = true
					out = append(out, mp)
				}
			}
		}
		return out
	}
	p.errorf(v, "merge key << needs a mapping or a list of mappings, got %s", describe(v))
	return nil
}

// keyString returns a mapping key, which must be a string.
func (p *parser) keyString(kn *yaml.Node) (string, bool) {
	k := deref(kn)
	if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
		p.errorf(kn, "mapping keys must be strings, got %s", describe(kn))
		return "", false
	}
	return k.Value, true
}

// fieldSet holds the entries of a mapping with a fixed set of keys.
type fieldSet map[string]pair

// given returns the entry for key unless it is absent or null: an optional
// key left empty means its default.
func (f fieldSet) given(key string) (pair, bool) {
	e, ok := f[key]
	return e, ok && !isNull(e.v)
}

// fields reads a mapping with a fixed set of keys. where names the mapping
// in messages ("task entry"). It reports unknown keys and returns nil if n
// is not a mapping.
func (p *parser) fields(n *yaml.Node, where string, known ...string) fieldSet {
	if deref(n).Kind != yaml.MappingNode {
		p.errorf(n, "%s: expected a mapping, got %s", where, describe(n))
		return nil
	}
	out := make(fieldSet)
	for _, e := range p.pairs(n) {
		ok := false
		for _, k := range known {
			if k == e.key {
				ok = true
				break
			}
		}
		if !ok {
			p.errorf(e.k, "unknown key %s in %s (expected one of: %s)", short(e.key), where, strings.Join(known, ", "))
			continue
		}
		out[e.key] = e
	}
	return out
}

// str reads a string. Numbers are accepted as written (name: 2024), since
// a user who writes them means the text.
func (p *parser) str(n *yaml.Node, label string) (string, bool) {
	t := deref(n)
	if t.Kind == yaml.ScalarNode {
		switch t.ShortTag() {
		case "!!str", "!!int", "!!float", "!!timestamp":
			if !utf8.ValidString(t.Value) {
				p.errorf(n, "%s: string is not valid UTF-8", label)
				return "", false
			}
			return t.Value, true
		}
	}
	p.errorf(n, "%s: expected a string, got %s", label, describe(n))
	return "", false
}

// integer reads an integer in [lo, hi].
func (p *parser) integer(n *yaml.Node, label string, lo, hi int64) (int64, bool) {
	t := deref(n)
	if t.Kind == yaml.ScalarNode && t.ShortTag() == "!!float" && bigInt(t) {
		p.errorf(n, "%s: integer %s does not fit in 64 bits", label, t.Value)
		return 0, false
	}
	if t.Kind != yaml.ScalarNode || t.ShortTag() != "!!int" {
		p.errorf(n, "%s: expected an integer, got %s", label, describe(n))
		return 0, false
	}
	v, err := intValue(t)
	if err != nil {
		p.errorf(n, "%s: %v", label, err)
		return 0, false
	}
	if v < lo || v > hi {
		if hi == math.MaxInt64 {
			p.errorf(n, "%s: must be at least %d, got %d", label, lo, v)
		} else {
			p.errorf(n, "%s: must be between %d and %d, got %d", label, lo, hi, v)
		}
		return 0, false
	}
	return v, true
}

// boolean reads true or false.
func (p *parser) boolean(n *yaml.Node, label string) (bool, bool) {
	t := deref(n)
	if t.Kind == yaml.ScalarNode && t.ShortTag() == "!!bool" {
		v, err := scalarValue(t)
		if b, ok := v.(bool); ok && err == nil {
			return b, true
		}
	}
	p.errorf(n, "%s: expected true or false, got %s", label, describe(n))
	return false, false
}

// number reads an integer or a float as a float64.
func (p *parser) number(n *yaml.Node, label string) (float64, bool) {
	t := deref(n)
	if t.Kind == yaml.ScalarNode {
		if tag := t.ShortTag(); tag == "!!int" || tag == "!!float" {
			v, err := scalarValue(t)
			if err != nil {
				p.errorf(n, "%s: %v", label, err)
				return 0, false
			}
			switch v := v.(type) {
			case int64:
				return float64(v), true
			case float64:
				return v, true
			}
		}
	}
	p.errorf(n, "%s: expected a number, got %s", label, describe(n))
	return 0, false
}

// value converts a params value into a JSON-compatible Go value: string,
// bool, int64, float64, nil, []any or map[string]any. The shape check has
// bounded its depth and its size.
func (p *parser) value(n *yaml.Node) (any, bool) {
	t := deref(n)
	switch t.Kind {
	case yaml.ScalarNode:
		v, err := scalarValue(t)
		if err != nil {
			p.errorf(n, "%v", err)
			return nil, false
		}
		return v, true
	case yaml.SequenceNode:
		list := make([]any, 0, len(t.Content))
		ok := true
		for _, item := range t.Content {
			v, good := p.value(item)
			ok = ok && good
			list = append(list, v)
		}
		return list, ok
	case yaml.MappingNode:
		return p.mapping(t)
	}
	p.errorf(n, "unexpected YAML node")
	return nil, false
}

// mapping converts a params mapping; see value.
func (p *parser) mapping(n *yaml.Node) (map[string]any, bool) {
	prs := p.pairs(n)
	m := make(map[string]any, len(prs))
	ok := true
	for _, e := range prs {
		v, good := p.value(e.v)
		ok = ok && good
		m[e.key] = v
	}
	return m, ok
}

// scalarValue resolves a scalar the way yaml.v3 does (!!int -> int64,
// !!float -> float64, ...), rejecting what JSON cannot carry.
func scalarValue(t *yaml.Node) (any, error) {
	tagged := t.Style&yaml.TaggedStyle != 0
	switch tag := t.ShortTag(); tag {
	case "!!str":
		if !utf8.ValidString(t.Value) {
			return nil, errors.New("string is not valid UTF-8")
		}
		return t.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		if !tagged {
			switch t.Value {
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
		}
	case "!!int":
		return intValue(t)
	case "!!float":
		if bigInt(t) {
			return nil, fmt.Errorf("integer %s does not fit in 64 bits", t.Value)
		}
	case "!!timestamp", "!!merge":
		if !tagged {
			// yaml.v3 also keeps an unquoted date as its text.
			return t.Value, nil
		}
		return nil, errors.New(unsupportedTag(tag))
	default:
		return nil, errors.New(unsupportedTag(tag))
	}
	var v any
	if err := t.Decode(&v); err != nil {
		return nil, fmt.Errorf("cannot read %s as %s", strconv.Quote(t.Value), t.ShortTag())
	}
	switch x := v.(type) {
	case bool:
		return x, nil
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s is not a finite number (JSON has no NaN or infinity)", t.Value)
		}
		if x == 0 {
			x = 0 // -0.0 means 0 (found by FuzzRoundTrip)
		}
		return x, nil
	}
	return nil, fmt.Errorf("cannot read %s as %s", strconv.Quote(t.Value), t.ShortTag())
}

var bigIntRE = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)

// bigInt is true for an integer too large for int64, which yaml.v3 turns
// into a float. Rejecting it keeps integers exact (as for uint64 values).
func bigInt(t *yaml.Node) bool {
	return t.Style&yaml.TaggedStyle == 0 && bigIntRE.MatchString(t.Value)
}

// intValue reads an !!int scalar as an int64.
func intValue(t *yaml.Node) (int64, error) {
	if t.Style&yaml.TaggedStyle == 0 {
		if v, err := strconv.ParseInt(t.Value, 10, 64); err == nil {
			return v, nil
		}
	}
	var v any
	if err := t.Decode(&v); err != nil {
		return 0, fmt.Errorf("cannot read %s as an integer", strconv.Quote(t.Value))
	}
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), nil
		}
	case float64:
		// !!int applied to a float-looking value is a decode error above;
		// nothing else produces a float here.
	}
	return 0, fmt.Errorf("integer %s does not fit in 64 bits", t.Value)
}
