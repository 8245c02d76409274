package report

import (
	"bytes"
	"fmt"
	"html/template"
	"strings"

	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// PageFile is the HTML page of a report directory: the debate browser of a debate run or
// a comparison (browser.go), the training page of a training run (livepage.go). Each is
// one self-contained file: styles, script, data and figures (inline SVG) in the page,
// nothing fetched, so it opens from disk or a copied folder.
const PageFile = "index.html"

// pageFigure is a figure inlined in a page, shown at Width (CSS): most of its natural
// size, so that two of the usual figures fit side by side.
type pageFigure struct {
	SVG   template.HTML
	Width string
}

// inlineSVGs draws figures as SVG markup for a page: gonum's SVG without its XML prolog.
// Its text is escaped by gonum (vgsvg writes every string through html.EscapeString) and
// it holds no script, so the page may trust it.
func inlineSVGs(figures []figure) ([]pageFigure, error) {
	out := make([]pageFigure, len(figures))
	for i, f := range figures {
		c := vgsvg.New(f.w, f.h)
		f.paint(draw.New(c))
		var b bytes.Buffer
		if _, err := c.WriteTo(&b); err != nil {
			return nil, fmt.Errorf("figure %s: %w", f.name, err)
		}
		s := b.String()
		start := strings.Index(s, "<svg")
		if start < 0 {
			return nil, fmt.Errorf("figure %s: gonum wrote no <svg> element", f.name)
		}
		out[i] = pageFigure{SVG: template.HTML(s[start:]), Width: fmt.Sprintf("%.0fpt", 0.8*f.w.Points())}
	}
	return out, nil
}

// pageStyle is the pages' shared stylesheet. Long lines wrap anywhere so that a response
// of one very long line cannot widen the page.
const pageStyle = `body{font-family:sans-serif;margin:1.5em;color:#222;max-width:110em}
h1{font-size:1.4em}h2{font-size:1.2em;margin-top:1.5em}h3{font-size:1.05em;margin:.2em 0}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f3f3f3}
td.l,th.l{text-align:left}
figure{margin:.5em 1em .5em 0;display:inline-block;max-width:100%}figure svg{width:100%;height:auto}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:.3em 0;font-size:12px;background:#fafafa;padding:.4em;max-height:30em;overflow:auto}
.muted{color:#777}
`
