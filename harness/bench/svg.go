package bench

import (
	"fmt"
	"html"
	"math"
	"os"
	"strconv"
	"strings"
)

// Hand-written SVG charts: an XY plot (points and lines, horizontal
// reference lines) and a grouped bar chart with reference marks. No
// dependencies; the output is plain SVG 1.1 that browsers, rsvg-convert
// and ImageMagick render alike.

// Palette is a colour-blind-safe palette (Okabe & Ito).
var Palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}

// SeriesKind is how a series is drawn.
type SeriesKind int

const (
	Points SeriesKind = iota
	Line
	LinePoints
)

// Series is one data set of a Plot.
type Series struct {
	Name   string
	X, Y   []float64
	Kind   SeriesKind
	Color  string // default: from Palette
	Dashed bool
	Radius float64 // points (default 2.5)
	// Lo and Hi, if set, are error bars at each point (a 95 % interval;
	// NaN: none).
	Lo, Hi []float64
}

// HLine is a horizontal reference line with a label.
type HLine struct {
	Y      float64
	Label  string
	Color  string
	Dashed bool
}

// Plot is an XY chart.
type Plot struct {
	Title, XLabel, YLabel string
	Width, Height         int // default 860 x 480
	Series                []Series
	HLines                []HLine
	// XZero and YZero start the axes at 0; YMax, if > 0, fixes the top.
	// XInt puts the x ticks on whole numbers; XPad leaves that share of the
	// x range free on each side (points on the edge stay whole).
	XInt  bool
	XPad  float64
	XZero bool
	YZero bool
	YMax  float64
	// Note is a line of small print under the chart.
	Note string
}

// Bars is a grouped bar chart: for each category one bar per group.
type Bars struct {
	Title, YLabel string
	Width, Height int
	Categories    []string
	Groups        []BarGroup
	// Marks are reference values drawn as a short black-edged line across
	// each category (NaN: none), like a paper's figure beside ours.
	Marks []BarGroup
	// Format formats bar values (default %.3g).
	Format func(float64) string
	YMax   float64
	Note   string
}

// BarGroup is one series of bars (or marks) across the categories.
type BarGroup struct {
	Name   string
	Values []float64 // NaN: no bar
	Color  string
	// Lo and Hi, if set, are error bars on the bars (a 95 % interval;
	// NaN: none).
	Lo, Hi []float64
}

// errorBar draws a vertical error bar from lo to hi at x with caps half
// as wide as w.
func (b *svgBuf) errorBar(x, w float64, lo, hi float64, y func(float64) float64) {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return
	}
	y0, y1 := y(lo), y(hi)
	b.f(`<g stroke="#222" stroke-width="1.5"><line x1="%s" y1="%s" x2="%s" y2="%s"/><line x1="%s" y1="%s" x2="%s" y2="%s"/><line x1="%s" y1="%s" x2="%s" y2="%s"/></g>`+"\n",
		num(x), num(y0), num(x), num(y1),
		num(x-w/2), num(y0), num(x+w/2), num(y0),
		num(x-w/2), num(y1), num(x+w/2), num(y1))
}

// at is xs[i], or NaN when xs is too short.
func at(xs []float64, i int) float64 {
	if i < len(xs) {
		return xs[i]
	}
	return math.NaN()
}

type frame struct {
	w, h                   float64
	left, right, top, bott float64
}

func (f frame) pw() float64 { return f.w - f.left - f.right }
func (f frame) ph() float64 { return f.h - f.top - f.bott }

type svgBuf struct{ strings.Builder }

func (b *svgBuf) f(format string, args ...any) { fmt.Fprintf(&b.Builder, format, args...) }

func esc(s string) string { return html.EscapeString(s) }

func num(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

func (b *svgBuf) header(fr frame, title string) {
	b.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">`+"\n",
		int(fr.w), int(fr.h), int(fr.w), int(fr.h))
	b.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	b.f(`<text x="%s" y="24" text-anchor="middle" font-size="16" font-weight="bold">%s</text>`+"\n", num(fr.w/2), esc(title))
}

func (b *svgBuf) footer(fr frame, note string) {
	if note != "" {
		b.f(`<text x="%s" y="%s" font-size="11" fill="#555">%s</text>`+"\n", num(12), num(fr.h-8), esc(note))
	}
	b.f("</svg>\n")
}

// niceTicks returns about n round tick values covering [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if math.IsNaN(lo) || math.IsInf(lo, 0) {
		lo = 0
	}
	if !(hi > lo) || math.IsInf(hi, 0) {
		hi = lo + 1
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	// From the first tick at or above lo to the first at or above hi: an
	// axis that ends on a tick.
	var out []float64
	for i := math.Ceil(lo/step - 1e-9); ; i++ {
		out = append(out, i*step+0) // +0: no "-0"
		if i*step >= hi-step*1e-9 || len(out) > 100 {
			break
		}
	}
	return out
}

func tickLabel(v float64) string {
	if v == 0 {
		return "0"
	}
	a := math.Abs(v)
	switch {
	case a >= 1e6 || a < 1e-3:
		return strconv.FormatFloat(v, 'g', 3, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 3, 64), "0"), ".")
}

func (b *svgBuf) yAxis(fr frame, lo, hi float64, ticks []float64, label string) func(float64) float64 {
	y := func(v float64) float64 { return fr.top + fr.ph() - (v-lo)/(hi-lo)*fr.ph() }
	for _, t := range ticks {
		if t < lo-1e-12 || t > hi+1e-12 {
			continue
		}
		b.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#e3e3e3"/>`+"\n", num(fr.left), num(y(t)), num(fr.left+fr.pw()), num(y(t)))
		b.f(`<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n", num(fr.left-6), num(y(t)+4), tickLabel(t))
	}
	b.f(`<text transform="translate(%s,%s) rotate(-90)" text-anchor="middle">%s</text>`+"\n", num(18), num(fr.top+fr.ph()/2), esc(label))
	return y
}

// legendRows lays the legend items out in rows under the chart, as wide
// as the plot area; it returns each item's row and x offset.
func legendRows(fr frame, items []legendItem) (rows int, pos [][2]float64) {
	x, row := 0.0, 0
	for _, it := range items {
		w := 34 + float64(len([]rune(it.name)))*7.0 + 18
		if x > 0 && x+w > fr.w-fr.left-12 {
			row++
			x = 0
		}
		pos = append(pos, [2]float64{x, float64(row)})
		x += w
	}
	if len(items) > 0 {
		rows = row + 1
	}
	return rows, pos
}

// legend draws the items in rows below the x axis label.
func (b *svgBuf) legend(fr frame, items []legendItem) {
	_, pos := legendRows(fr, items)
	for i, it := range items {
		x0 := fr.left + pos[i][0]
		yy := fr.top + fr.ph() + 58 + pos[i][1]*20
		switch it.kind {
		case "point":
			b.f(`<circle cx="%s" cy="%s" r="4" fill="%s"/>`+"\n", num(x0+12), num(yy-4), it.color)
		case "bar":
			b.f(`<rect x="%s" y="%s" width="18" height="11" fill="%s"/>`+"\n", num(x0+3), num(yy-10), it.color)
		default:
			dash := ""
			if it.dashed {
				dash = ` stroke-dasharray="6,4"`
			}
			b.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2.5"%s/>`+"\n", num(x0), num(yy-4), num(x0+24), num(yy-4), it.color, dash)
		}
		b.f(`<text x="%s" y="%s">%s</text>`+"\n", num(x0+30), num(yy), esc(it.name))
	}
}

type legendItem struct {
	name, color, kind string
	dashed            bool
}

func finiteRange(vals ...[]float64) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, vs := range vals {
		for _, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			lo, hi = math.Min(lo, v), math.Max(hi, v)
			ok = true
		}
	}
	return lo, hi, ok
}

// SVG renders the plot.
func (p *Plot) SVG() string {
	fr := frame{w: float64(p.Width), h: float64(p.Height), left: 72, right: 24, top: 40, bott: 58}
	if fr.w == 0 {
		fr.w = 860
	}
	if fr.h == 0 {
		fr.h = 480
	}
	var xs, ys [][]float64
	for _, s := range p.Series {
		xs, ys = append(xs, s.X), append(ys, s.Y, s.Lo, s.Hi)
	}
	for _, h := range p.HLines {
		ys = append(ys, []float64{h.Y})
	}
	xlo, xhi, okx := finiteRange(xs...)
	if !okx {
		xlo, xhi = 0, 1
	}
	ylo, yhi, ok := finiteRange(ys...)
	if !ok {
		ylo, yhi = 0, 1
	}
	if p.YZero {
		ylo = math.Min(0, ylo)
	}
	if p.YMax > 0 {
		yhi = p.YMax
	} else {
		yhi += (yhi - ylo) * 0.08
	}
	if p.XZero {
		xlo = math.Min(0, xlo)
	}
	if !(xhi > xlo) {
		xlo, xhi = xlo-1, xhi+1
	}
	yt := niceTicks(ylo, yhi, 6)
	if p.YMax == 0 {
		yhi = math.Max(yhi, yt[len(yt)-1])
	}
	ylo = math.Min(ylo, yt[0])
	if p.XPad > 0 {
		pad := (xhi - xlo) * p.XPad
		xlo, xhi = xlo-pad, xhi+pad
	}
	xt := niceTicks(xlo, xhi, 8)
	if p.XInt {
		var whole []float64
		for _, t := range xt {
			if t == math.Trunc(t) {
				whole = append(whole, t)
			}
		}
		if len(whole) >= 2 {
			xt = whole
		}
	}
	if p.XPad == 0 {
		xlo, xhi = math.Min(xlo, xt[0]), math.Max(xhi, xt[len(xt)-1])
	}

	var b svgBuf
	y := b.yAxis(fr, ylo, yhi, yt, p.YLabel)
	x := func(v float64) float64 { return fr.left + (v-xlo)/(xhi-xlo)*fr.pw() }
	for _, t := range xt {
		if t < xlo-1e-9 || t > xhi+1e-9 {
			continue
		}
		b.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#999"/>`+"\n", num(x(t)), num(fr.top+fr.ph()), num(x(t)), num(fr.top+fr.ph()+5))
		b.f(`<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(x(t)), num(fr.top+fr.ph()+19), tickLabel(t))
	}
	b.f(`<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(fr.left+fr.pw()/2), num(fr.h-24), esc(p.XLabel))
	b.f(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#777"/>`+"\n", num(fr.left), num(fr.top), num(fr.pw()), num(fr.ph()))
	b.f(`<clipPath id="plot"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>`+"\n", num(fr.left), num(fr.top), num(fr.pw()), num(fr.ph()))
	b.f(`<g clip-path="url(#plot)">` + "\n")
	var items []legendItem
	for i, h := range p.HLines {
		c := h.Color
		if c == "" {
			c = "#444"
		}
		dash := ""
		if h.Dashed {
			dash = ` stroke-dasharray="8,5"`
		}
		b.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"%s/>`+"\n", num(fr.left), num(y(h.Y)), num(fr.left+fr.pw()), num(y(h.Y)), c, dash)
		if h.Label != "" {
			items = append(items, legendItem{name: h.Label, color: c, kind: "line", dashed: h.Dashed})
		}
		_ = i
	}
	for i, s := range p.Series {
		c := s.Color
		if c == "" {
			c = Palette[i%len(Palette)]
		}
		r := s.Radius
		if r == 0 {
			r = 2.5
		}
		if s.Kind == Line || s.Kind == LinePoints {
			// A NaN breaks the line (a gap in the data).
			dash := ""
			if s.Dashed {
				dash = ` stroke-dasharray="6,4"`
			}
			var pts []string
			flush := func() {
				if len(pts) > 1 {
					b.f(`<polyline fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s points="%s"/>`+"\n", c, dash, strings.Join(pts, " "))
				}
				pts = pts[:0]
			}
			for j := range s.X {
				if j < len(s.Y) && !math.IsNaN(s.Y[j]) && !math.IsNaN(s.X[j]) {
					pts = append(pts, num(x(s.X[j]))+","+num(y(s.Y[j])))
				} else {
					flush()
				}
			}
			flush()
		}
		for j := range s.X {
			b.errorBar(x(s.X[j]), 8, at(s.Lo, j), at(s.Hi, j), y)
		}
		if s.Kind == Points || s.Kind == LinePoints {
			b.f(`<g fill="%s" fill-opacity="0.75">`+"\n", c)
			for j := range s.X {
				if j < len(s.Y) && !math.IsNaN(s.Y[j]) {
					b.f(`<circle cx="%s" cy="%s" r="%s"/>`+"\n", num(x(s.X[j])), num(y(s.Y[j])), num(r))
				}
			}
			b.f("</g>\n")
		}
		if s.Name != "" {
			kind := "line"
			if s.Kind == Points {
				kind = "point"
			}
			items = append(items, legendItem{name: s.Name, color: c, kind: kind, dashed: s.Dashed})
		}
	}
	b.f("</g>\n")
	return assemble(fr, p.Title, p.Note, &b, items)
}

// SVG renders the bar chart.
func (p *Bars) SVG() string {
	fr := frame{w: float64(p.Width), h: float64(p.Height), left: 72, right: 24, top: 40, bott: 64}
	if fr.w == 0 {
		fr.w = 860
	}
	if fr.h == 0 {
		fr.h = 480
	}
	format := p.Format
	if format == nil {
		format = func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) }
	}
	var all [][]float64
	for _, g := range p.Groups {
		all = append(all, g.Values, g.Hi)
	}
	for _, g := range p.Marks {
		all = append(all, g.Values)
	}
	_, hi, ok := finiteRange(all...)
	if !ok || hi <= 0 {
		hi = 1
	}
	if p.YMax > 0 {
		hi = p.YMax
	} else {
		hi *= 1.12
	}
	yt := niceTicks(0, hi, 6)
	if p.YMax == 0 {
		hi = math.Max(hi, yt[len(yt)-1])
	}
	var b svgBuf
	y := b.yAxis(fr, 0, hi, yt, p.YLabel)
	b.f(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#777"/>`+"\n", num(fr.left), num(fr.top), num(fr.pw()), num(fr.ph()))
	nc := max(len(p.Categories), 1)
	cw := fr.pw() / float64(nc)
	ng := max(len(p.Groups), 1)
	bw := cw * 0.72 / float64(ng)
	var items []legendItem
	for gi, g := range p.Groups {
		c := g.Color
		if c == "" {
			c = Palette[gi%len(Palette)]
		}
		items = append(items, legendItem{name: g.Name, color: c, kind: "bar"})
		for ci := range p.Categories {
			if ci >= len(g.Values) || math.IsNaN(g.Values[ci]) {
				continue
			}
			v := g.Values[ci]
			x0 := fr.left + float64(ci)*cw + cw*0.14 + float64(gi)*bw
			top := y(math.Min(v, hi))
			b.f(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n", num(x0), num(top), num(bw*0.92), num(fr.top+fr.ph()-top), c)
			label := top - 4
			if hi := at(g.Hi, ci); !math.IsNaN(hi) {
				b.errorBar(x0+bw*0.46, bw*0.3, math.Max(at(g.Lo, ci), 0), math.Min(hi, p.yTop(hi)), y)
				label = math.Min(label, y(math.Min(hi, p.yTop(hi)))-4)
			}
			b.f(`<text x="%s" y="%s" text-anchor="middle" font-size="11">%s</text>`+"\n", num(x0+bw*0.46), num(label), esc(format(v)))
		}
	}
	for mi, m := range p.Marks {
		c := m.Color
		if c == "" {
			c = "#000"
		}
		items = append(items, legendItem{name: m.Name, color: c, kind: "line", dashed: mi%2 == 1})
		for ci := range p.Categories {
			if ci >= len(m.Values) || math.IsNaN(m.Values[ci]) {
				continue
			}
			x0 := fr.left + float64(ci)*cw + cw*0.08
			dash := ""
			if mi%2 == 1 {
				dash = ` stroke-dasharray="6,4"`
			}
			b.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="3"%s/>`+"\n", num(x0), num(y(m.Values[ci])), num(x0+cw*0.84), num(y(m.Values[ci])), c, dash)
		}
	}
	for ci, cat := range p.Categories {
		cx := fr.left + float64(ci)*cw + cw/2
		b.f(`<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(cx), num(fr.top+fr.ph()+19), esc(cat))
	}
	return assemble(fr, p.Title, p.Note, &b, items)
}

// yTop clips a value to the chart's fixed top, if it has one.
func (p *Bars) yTop(v float64) float64 {
	if p.YMax > 0 {
		return math.Min(v, p.YMax)
	}
	return v
}

// assemble puts the title, the chart body, the legend rows under it and
// the note together, making the picture taller for the legend.
func assemble(fr frame, title, note string, body *svgBuf, items []legendItem) string {
	rows, _ := legendRows(fr, items)
	full := fr
	extra := float64(rows)*20 + 4
	full.h += extra
	full.bott += extra
	var b svgBuf
	b.header(full, title)
	b.WriteString(body.String())
	b.legend(fr, items)
	b.footer(full, note)
	return b.String()
}

// writeSVG writes a chart into the suite's folder.
func (e *Env) writeSVG(name, svg string) error {
	return os.WriteFile(e.path(name), []byte(svg), 0o644)
}
