package report

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/umad-dev/umad/uncertainty"
)

// inked is the share of pixels in r that are not near white.
func inked(img image.Image, r image.Rectangle) float64 {
	n, total := 0, 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if cr < 0xf000 || cg < 0xf000 || cb < 0xf000 {
				n++
			}
			total++
		}
	}
	return float64(n) / float64(total)
}

var svgText = regexp.MustCompile(`<text[^>]*>([^<]*)</text>`)

// lookAt checks a figure as a person would: the PNG has ink in each of the layout's
// panels (a panel of one point per line, axes and labels inks about 2%) and none in the
// grid's empty cells, and the SVG shows every panel's title and
// legend entries as text.
func lookAt(t *testing.T, dir string, layout FigureLayout) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, layout.Name+".png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("%s.png: %v", layout.Name, err)
	}
	b := img.Bounds()
	if share := inked(img, b); share < 0.02 {
		t.Errorf("%s.png is blank (%.3f inked)", layout.Name, share)
	}
	cw, ch := b.Dx()/layout.Cols, b.Dy()/layout.Rows
	for i := range layout.Rows * layout.Cols {
		// The middle of grid cell i, clear of the padding between panels.
		x, y := (i%layout.Cols)*cw, (i/layout.Cols)*ch
		cell := image.Rect(x+cw/5, y+ch/5, x+4*cw/5, y+4*ch/5)
		share := inked(img, cell)
		if i < len(layout.Panels) && share < 0.005 {
			t.Errorf("%s.png: panel %d is blank (%.3f inked)", layout.Name, i, share)
		}
		if i >= len(layout.Panels) && share > 0 {
			t.Errorf("%s.png: grid cell %d has no panel but %.3f ink", layout.Name, i, share)
		}
	}
	svg, err := os.ReadFile(filepath.Join(dir, layout.Name+".svg"))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range svgText.FindAllStringSubmatch(string(svg), -1) {
		texts = append(texts, m[1])
	}
	for _, pn := range layout.Panels {
		for _, want := range append([]string{pn.Title}, pn.Legend...) {
			if !slices.Contains(texts, want) {
				t.Errorf("%s.svg does not show %q", layout.Name, want)
			}
		}
	}
}

// Figures of four configurations (one of a single turn) and two base/trained pairs:
// Fig. 1 has its two panels with a legend entry per run, Fig. 2 a panel per run, Fig. 3
// a panel per pair, Fig. 5 one panel of the runs that debated, an entry per agent.
func TestWriteRunFigures(t *testing.T) {
	baseline := func(i, a, _ int) bool { return (a == 0 && i%2 == 0) || (a == 1 && i%3 == 0) }
	trained := func(i, a, turn int) bool { return baseline(i, a, turn) || (a == 0 && turn > 0) }
	mean := func(recs []uncertainty.ProblemRecord) uncertainty.Summary {
		return debateRun(t, "", recs, "1").Summary.Mean
	}
	runs := []Series{
		{"Zero-Shot", mean(debateRecords(6, 3, baseline))},
		{"UMAD", mean(debateRecords(6, 3, trained))},
		{"IPPO", mean(records(2, true))},
		{"single turn", mean(debateRecords(6, 1, baseline))},
	}
	pairs := []Pair{
		{"UMAD", runs[0].Summary, runs[1].Summary},
		{"train-run", *summary(t, false), *summary(t, true)},
	}
	dir := t.TempDir()
	layouts, err := WriteRunFigures(dir, runs, pairs)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"Zero-Shot", "UMAD", "IPPO", "single turn"}
	uncertaintyLegend := []string{"TU", "EU", "A0 accuracy", "A1 accuracy"}
	// Fig. 3: the team's EU and AU against each agent's accuracy, as the paper's.
	pairLegend := []string{"base EU", "trained EU", "base AU", "trained AU", "base A0 accuracy", "trained A0 accuracy", "base A1 accuracy", "trained A1 accuracy"}
	want := []FigureLayout{
		{Fig1, 1, 2, []PanelLayout{{"Team accuracy per turn", names}, {"Mean token entropy per turn", names}}},
		{Fig2, 2, 3, []PanelLayout{{"Zero-Shot (average)", uncertaintyLegend}, {"UMAD (average)", uncertaintyLegend},
			{"IPPO (average)", uncertaintyLegend}, {"single turn (average)", uncertaintyLegend}}},
		{Fig3, 1, 2, []PanelLayout{{"UMAD: base vs trained", pairLegend}, {"train-run: base vs trained", pairLegend}}},
		{Fig5, 1, 1, []PanelLayout{{"First-turn flip ratio (turn 0 → 1, strict)", []string{"A0", "A1"}}}},
	}
	if !reflect.DeepEqual(layouts, want) {
		t.Errorf("layouts\n%+v\nwant\n%+v", layouts, want)
	}
	for _, l := range layouts {
		lookAt(t, dir, l)
	}
	noTempFiles(t, dir)

	// No pairs and no run that debated: Figs. 1 and 2 only.
	layouts, err = WriteRunFigures(t.TempDir(), runs[3:], nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(layouts) != 2 || layouts[0].Name != Fig1 || layouts[1].Name != Fig2 || len(layouts[1].Panels) != 1 {
		t.Errorf("single-turn run alone: %+v", layouts)
	}
}
