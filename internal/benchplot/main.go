// Command benchplot draws the scaling curves (`make scaling-plot`) as a
// small PNG, from `go test -bench` output on standard input:
//
//	make bench | go run ./internal/benchplot -o scaling.png
//
// Each benchmark with sub-benchmarks named key=N (turns=8, logs=64, ...)
// is one panel: the median of each sub-benchmark's metric (-metric, per
// benchmark: ns/turn for runs, events/s for the store, pairs/s for the
// scheduler), relative to the smallest N, against N. A flat line at 1
// means the cost does not grow with N. It uses the standard library only.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// maxInput bounds what benchplot reads.
const maxInput = 16 << 20

func main() {
	out := flag.String("o", "scaling.png", "the PNG to write")
	flag.Parse()
	if err := run(os.Stdin, *out); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

// metrics names the metric each benchmark family is plotted by.
var metrics = map[string]string{
	"BenchmarkScalingRunTurns":   "ns/turn",
	"BenchmarkScalingPairRounds": "ns/round",
	"BenchmarkStoreObserver":     "events/s",
	"BenchmarkSchedulerPairs":    "pairs/s",
	"BenchmarkOpenAIStream":      "ns/chunk",
}

func run(in io.Reader, out string) error {
	series, err := parse(io.LimitReader(in, maxInput))
	if err != nil {
		return err
	}
	if len(series) == 0 {
		return errors.New("no scaling benchmarks in the input")
	}
	img := draw(series)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// series is one panel: N to the values measured at N.
type series struct {
	name   string
	key    string
	points map[float64][]float64
}

// parse reads benchmark lines such as
//
//	BenchmarkStoreObserver/logs=8-2  4033  259931 ns/op  3847 events/s
func parse(in io.Reader) ([]*series, error) {
	byName := map[string]*series{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name, sub, ok := strings.Cut(f[0], "/")
		if !ok {
			continue
		}
		metric := metrics[name]
		if metric == "" {
			continue
		}
		if i := strings.LastIndexByte(sub, '-'); i > 0 {
			sub = sub[:i] // the GOMAXPROCS suffix
		}
		key, num, ok := strings.Cut(sub, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(num, 64)
		if err != nil || n <= 0 || n > 1e9 {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			if f[i+1] != metric {
				continue
			}
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil || v <= 0 || v > 1e15 {
				continue // also NaN and infinities
			}
			s := byName[name]
			if s == nil {
				s = &series{name: name, key: key, points: map[float64][]float64{}}
				byName[name] = s
			}
			s.points[n] = append(s.points[n], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var all []*series
	for _, s := range byName {
		all = append(all, s)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	return all, nil
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

const (
	panelW, panelH = 240, 160
	margin         = 24
	yMin           = 2.0 // the least top of a panel's y axis
)

var (
	white = color.RGBA{255, 255, 255, 255}
	grey  = color.RGBA{200, 200, 200, 255}
	black = color.RGBA{0, 0, 0, 255}
	blue  = color.RGBA{30, 90, 200, 255}
)

// draw lays the panels out side by side. In each, x is N on a log scale,
// y the median relative to the smallest N, from 0 to the top written in
// the panel's corner, with a grey line at 1.
func draw(all []*series) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, len(all)*(panelW+margin)+margin, panelH+4*margin))
	fill(img, img.Bounds(), white)
	for i, s := range all {
		x0, y0 := margin+i*(panelW+margin), 2*margin
		frame := image.Rect(x0, y0, x0+panelW, y0+panelH)
		box(img, frame, black)
		text(img, x0, margin/2, strings.TrimPrefix(s.name, "Benchmark"), black)
		var ns []float64
		for n := range s.points {
			ns = append(ns, n)
		}
		slices.Sort(ns)
		base := median(s.points[ns[0]])
		top := yMin
		for _, n := range ns {
			top = max(top, 1.1*median(s.points[n])/base)
		}
		yOf := func(rel float64) int {
			return y0 + panelH - 1 - int(rel/top*float64(panelH-2))
		}
		line(img, x0, yOf(1), x0+panelW-1, yOf(1), grey)
		text(img, x0-margin+4, yOf(1)-4, "1", black)
		text(img, x0+4, y0+4, strconv.FormatFloat(top, 'f', 1, 64), black)
		lo, hi := log2(ns[0]), log2(ns[len(ns)-1])
		xOf := func(n float64) int {
			if hi == lo {
				return x0 + panelW/2
			}
			return x0 + 8 + int((log2(n)-lo)/(hi-lo)*float64(panelW-16))
		}
		px, py := -1, -1
		for _, n := range ns {
			x, y := xOf(n), yOf(median(s.points[n])/base)
			fill(img, image.Rect(x-2, y-2, x+3, y+3), blue)
			if px >= 0 {
				line(img, px, py, x, y, blue)
			}
			px, py = x, y
			text(img, x-4, y0+panelH+6, strconv.FormatFloat(n, 'f', -1, 64), black)
		}
		text(img, x0+panelW/2-8, y0+panelH+16, s.key, black)
	}
	return img
}

func log2(v float64) float64 {
	n := 0.0
	for v >= 2 {
		v /= 2
		n++
	}
	return n + (v - 1) // piecewise linear between powers of two: enough for ticks
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func box(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	line(img, r.Min.X, r.Min.Y, r.Max.X-1, r.Min.Y, c)
	line(img, r.Min.X, r.Max.Y-1, r.Max.X-1, r.Max.Y-1, c)
	line(img, r.Min.X, r.Min.Y, r.Min.X, r.Max.Y-1, c)
	line(img, r.Max.X-1, r.Min.Y, r.Max.X-1, r.Max.Y-1, c)
}

// line draws from (x0, y0) to (x1, y1) (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		if (image.Point{x0, y0}).In(img.Bounds()) {
			img.SetRGBA(x0, y0, c)
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func abs(v int) int { return max(v, -v) }

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// glyphs is a 3×5 pixel font for the labels: five rows of three bits.
var glyphs = map[rune][5]uint8{
	'0': {7, 5, 5, 5, 7}, '1': {2, 6, 2, 2, 7}, '2': {7, 1, 7, 4, 7}, '3': {7, 1, 7, 1, 7},
	'4': {5, 5, 7, 1, 1}, '5': {7, 4, 7, 1, 7}, '6': {7, 4, 7, 5, 7}, '7': {7, 1, 1, 1, 1},
	'8': {7, 5, 7, 5, 7}, '9': {7, 5, 7, 1, 7}, '.': {0, 0, 0, 0, 2}, '=': {0, 7, 0, 7, 0},
	'a': {7, 5, 7, 5, 5}, 'b': {6, 5, 6, 5, 6}, 'c': {7, 4, 4, 4, 7}, 'd': {6, 5, 5, 5, 6},
	'e': {7, 4, 7, 4, 7}, 'f': {7, 4, 7, 4, 4}, 'g': {7, 4, 5, 5, 7}, 'h': {5, 5, 7, 5, 5},
	'i': {7, 2, 2, 2, 7}, 'j': {1, 1, 1, 5, 7}, 'k': {5, 5, 6, 5, 5}, 'l': {4, 4, 4, 4, 7},
	'm': {5, 7, 7, 5, 5}, 'n': {6, 5, 5, 5, 5}, 'o': {7, 5, 5, 5, 7}, 'p': {7, 5, 7, 4, 4},
	'q': {7, 5, 5, 7, 1}, 'r': {6, 5, 6, 5, 5}, 's': {7, 4, 7, 1, 7}, 't': {7, 2, 2, 2, 2},
	'u': {5, 5, 5, 5, 7}, 'v': {5, 5, 5, 5, 2}, 'w': {5, 5, 7, 7, 5}, 'x': {5, 5, 2, 5, 5},
	'y': {5, 5, 7, 2, 2}, 'z': {7, 1, 2, 4, 7},
}

// text draws s at (x, y), two pixels per font pixel, lower-casing it.
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, r := range strings.ToLower(s) {
		g, ok := glyphs[r]
		if ok {
			for row, bits := range g {
				for col := range 3 {
					if bits&(4>>col) != 0 {
						fill(img, image.Rect(x+2*col, y+2*row, x+2*col+2, y+2*row+2), c)
					}
				}
			}
		}
		x += 8
	}
}
