package main

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strconv"
)

// Chart is a line chart written as a self-contained SVG, by hand: the
// plugin depends on nothing but the SDK and the standard library. The
// output depends only on the data, so it is byte-identical across runs.
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	Lines                 []HLine // dashed horizontal reference lines
}

// Series is one polyline.
type Series struct {
	Name string
	X, Y []float64
}

// HLine is a dashed horizontal line at Y.
type HLine struct {
	Name string
	Y    float64
}

// palette is a colour-blind-safe cycle (Okabe and Ito).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"}

// maxLegend bounds the entries of the legend.
const maxLegend = 12

const (
	chartW, chartH                  = 760, 460
	marginL, marginR, marginT, marB = 80, 24, 40, 56
)

// SVG renders the chart.
func (c *Chart) SVG() []byte {
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for i := range s.X {
			x0, x1 = math.Min(x0, s.X[i]), math.Max(x1, s.X[i])
			y0, y1 = math.Min(y0, s.Y[i]), math.Max(y1, s.Y[i])
		}
	}
	for _, l := range c.Lines {
		y0, y1 = math.Min(y0, l.Y), math.Max(y1, l.Y)
	}
	if math.IsInf(x0, 0) { // no data
		x0, x1, y0, y1 = 0, 1, 0, 1
	}
	xt := ticks(x0, x1)
	yt := ticks(y0, y1)
	x0, x1 = math.Min(x0, xt[0]), math.Max(x1, xt[len(xt)-1])
	y0, y1 = math.Min(y0, yt[0]), math.Max(y1, yt[len(yt)-1])
	if x1 == x0 {
		x1 = x0 + 1
	}
	if y1 == y0 {
		y1 = y0 + 1
	}
	pw, ph := float64(chartW-marginL-marginR), float64(chartH-marginT-marB)
	px := func(x float64) string { return num(float64(marginL) + (x-x0)/(x1-x0)*pw) }
	py := func(y float64) string { return num(float64(marginT) + (y1-y)/(y1-y0)*ph) }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="24" text-anchor="middle" font-size="15">%s</text>`+"\n", chartW/2, html.EscapeString(c.Title))
	for _, t := range yt {
		fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#ddd"/>`+"\n", marginL, py(t), chartW-marginR, py(t))
		fmt.Fprintf(&b, `<text x="%d" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", marginL-6, py(t), label(t))
	}
	for _, t := range xt {
		fmt.Fprintf(&b, `<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#ddd"/>`+"\n", px(t), marginT, px(t), chartH-marB)
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", px(t), chartH-marB+18, label(t))
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%s" height="%s" fill="none" stroke="#333"/>`+"\n", marginL, marginT, num(pw), num(ph))
	fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(float64(marginL)+pw/2), chartH-14, html.EscapeString(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(18 %s) rotate(-90)" text-anchor="middle">%s</text>`+"\n", num(float64(marginT)+ph/2), html.EscapeString(c.YLabel))
	for _, l := range c.Lines {
		fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#555" stroke-dasharray="6 4"/>`+"\n", marginL, py(l.Y), chartW-marginR, py(l.Y))
	}
	for i, s := range c.Series {
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="`, palette[i%len(palette)])
		for k := range s.X {
			if k > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(px(s.X[k]) + "," + py(s.Y[k]))
		}
		b.WriteString(`"/>` + "\n")
	}
	// Legend, top right inside the plot.
	type entry struct{ name, color, dash string }
	var legend []entry
	for i, s := range c.Series {
		legend = append(legend, entry{s.Name, palette[i%len(palette)], ""})
	}
	for _, l := range c.Lines {
		legend = append(legend, entry{l.Name, "#555", ` stroke-dasharray="6 4"`})
	}
	if len(legend) > maxLegend {
		legend = append(legend[:maxLegend-1], entry{fmt.Sprintf("… and %d more", len(legend)-maxLegend+1), "none", ""})
	}
	lx := chartW - marginR - 250
	for i, e := range legend {
		y := marginT + 16 + 16*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, y, lx+24, y, e.color, e.dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", lx+30, y, html.EscapeString(e.name))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// ticks returns about five round values covering [lo, hi].
func ticks(lo, hi float64) []float64 {
	if hi <= lo {
		return []float64{lo}
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ts []float64
	for t := math.Floor(lo/step) * step; t <= hi+step/2; t += step {
		ts = append(ts, t)
		if t >= hi {
			break
		}
	}
	return ts
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func label(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
