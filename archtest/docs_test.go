package archtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// architectureDoc is the page whose tables must match Layers().
const architectureDoc = "docs/architecture.md"

// TestArchitectureDocMatchesTheLayerTable holds the layer table of
// docs/architecture.md to Layers(): the same folders, levels, allowed
// imports and third-party permission.
func TestArchitectureDocMatchesTheLayerTable(t *testing.T) {
	root := moduleRoot(t)
	rows := docTable(t, filepath.Join(root, architectureDoc), "Layers")
	for _, p := range layerDocProblems(rows, Layers()) {
		t.Error(p)
	}
}

// TestArchitectureDocPackageMapIsComplete holds the package map of
// docs/architecture.md to the module: every package listed exactly once,
// at the level of the unit archtest puts it in, and nothing listed that
// is not a package.
func TestArchitectureDocPackageMapIsComplete(t *testing.T) {
	root := moduleRoot(t)
	rows := docTable(t, filepath.Join(root, architectureDoc), "Package map")
	goCmd, err := findGo()
	require.NoError(t, err)
	listed, err := goList(context.Background(), goCmd, root)
	require.NoError(t, err)
	var pkgs []string
	for _, p := range listed {
		if p.DepOnly || p.Standard || p.Module == nil || !p.Module.Main {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		require.NoError(t, err)
		pkgs = append(pkgs, filepath.ToSlash(rel))
	}
	require.NotEmpty(t, pkgs)
	for _, p := range packageMapProblems(rows, pkgs, Layers()) {
		t.Error(p)
	}
}

// TestDocCheckersCatchDrift shows that the two checkers above fail on the
// kinds of drift they exist for.
func TestDocCheckersCatchDrift(t *testing.T) {
	units := []Unit{
		{Dir: "app", Level: 3, MayImport: []string{"lib", "kernel"}, ThirdParty: true},
		{Dir: "lib", Level: 2, MayImport: []string{"kernel"}},
		{Dir: "kernel", Level: 1, Kernel: true},
		{Dir: "archtest", Unconstrained: true},
	}
	layers := [][]string{
		{"3", "`app`", "the app", "`lib`, `kernel`, third-party"},
		{"2", "`lib`", "a library", "`kernel`"},
		{"1", "`kernel`", "the kernel", "the standard library"},
		{"—", "`archtest`", "tests", "anything"},
	}
	require.Empty(t, layerDocProblems(layers, units))

	edit := func(row, col int, v string) [][]string {
		c := make([][]string, len(layers))
		for i := range layers {
			c[i] = slices.Clone(layers[i])
		}
		c[row][col] = v
		return c
	}
	require.NotEmpty(t, layerDocProblems(edit(1, 0, "4"), units), "wrong level")
	require.NotEmpty(t, layerDocProblems(edit(1, 3, "`kernel`, `app`"), units), "extra import")
	require.NotEmpty(t, layerDocProblems(edit(0, 3, "`lib`, `kernel`"), units), "third-party missing")
	require.NotEmpty(t, layerDocProblems(layers[1:], units), "folder missing")
	require.NotEmpty(t, layerDocProblems(append(slices.Clone(layers), []string{"2", "`extra`", "", ""}), units), "folder unknown")

	pkgs := []string{"app", "app/sub", "lib", "kernel/a", "archtest"}
	pkgMap := [][]string{
		{"3", "`app`, `app/sub`", "the app"},
		{"2", "`lib`", "a library"},
		{"1", "`kernel/a`", "kernel part"},
		{"—", "`archtest`", "tests"},
	}
	require.Empty(t, packageMapProblems(pkgMap, pkgs, units))
	require.NotEmpty(t, packageMapProblems(pkgMap[1:], pkgs, units), "package missing")
	require.NotEmpty(t, packageMapProblems(pkgMap, append(slices.Clone(pkgs), "lib/new"), units), "new package")
	require.NotEmpty(t, packageMapProblems(append(slices.Clone(pkgMap), []string{"2", "`lib`", "again"}), pkgs, units), "listed twice")
	require.NotEmpty(t, packageMapProblems(append(slices.Clone(pkgMap), []string{"2", "`lib/gone`", "x"}), pkgs, units), "not a package")
	require.NotEmpty(t, packageMapProblems([][]string{{"2", "`app`, `app/sub`", ""}, pkgMap[1], pkgMap[2], pkgMap[3]}, pkgs, units), "wrong layer")
}

var backticked = regexp.MustCompile("`([^`]+)`")

// ticks returns the backticked words of a table cell.
func ticks(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// parseLevel reads a layer cell: a number, or "—" for level 0.
func parseLevel(cell string) (int, error) {
	if cell == "—" {
		return 0, nil
	}
	return strconv.Atoi(cell)
}

// layerDocProblems compares the rows of the layer table (layer, folder,
// owns, may import) with units.
func layerDocProblems(rows [][]string, units []Unit) []string {
	var out []string
	byDir := make(map[string]Unit)
	for _, u := range units {
		byDir[u.Dir] = u
	}
	seen := make(map[string]bool)
	for _, r := range rows {
		if len(r) != 4 {
			out = append(out, fmt.Sprintf("layer table row %q: want 4 cells", r))
			continue
		}
		dirs := ticks(r[1])
		if len(dirs) != 1 {
			out = append(out, fmt.Sprintf("layer table row %q: want one backticked folder", r))
			continue
		}
		dir := dirs[0]
		u, ok := byDir[dir]
		if !ok {
			out = append(out, fmt.Sprintf("layer table: %s is not in archtest/layers.go", dir))
			continue
		}
		seen[dir] = true
		lvl, err := parseLevel(r[0])
		if err != nil || lvl != u.Level {
			out = append(out, fmt.Sprintf("layer table: %s is at layer %q, archtest/layers.go says %d", dir, r[0], u.Level))
		}
		if u.Kernel || u.Unconstrained {
			continue
		}
		may := ticks(r[3])
		if !equalSets(may, u.MayImport) {
			out = append(out, fmt.Sprintf("layer table: %s may import %v, archtest/layers.go says %v", dir, may, u.MayImport))
		}
		if third := strings.Contains(r[3], "third-party"); third != u.ThirdParty {
			out = append(out, fmt.Sprintf("layer table: %s third-party is %v, archtest/layers.go says %v", dir, third, u.ThirdParty))
		}
	}
	for _, u := range units {
		if !seen[u.Dir] {
			out = append(out, fmt.Sprintf("layer table: %s of archtest/layers.go is missing", u.Dir))
		}
	}
	return out
}

// packageMapProblems compares the rows of the package map (layer,
// packages, owns) with the module's packages and the units they fall in.
func packageMapProblems(rows [][]string, pkgs []string, units []Unit) []string {
	var out []string
	isPkg := make(map[string]bool)
	for _, p := range pkgs {
		isPkg[p] = true
	}
	seen := make(map[string]bool)
	for _, r := range rows {
		if len(r) != 3 {
			out = append(out, fmt.Sprintf("package map row %q: want 3 cells", r))
			continue
		}
		lvl, err := parseLevel(r[0])
		if err != nil {
			out = append(out, fmt.Sprintf("package map row %q: bad layer", r))
			continue
		}
		for _, p := range ticks(r[1]) {
			switch {
			case !isPkg[p]:
				out = append(out, fmt.Sprintf("package map: %s is not a package of the module", p))
			case seen[p]:
				out = append(out, fmt.Sprintf("package map: %s is listed twice", p))
			default:
				if u := unitFor(units, p); u == nil {
					out = append(out, fmt.Sprintf("package map: %s is in no unit of archtest/layers.go", p))
				} else if u.Level != lvl {
					out = append(out, fmt.Sprintf("package map: %s is at layer %q, archtest/layers.go puts %s at %d", p, r[0], u.Dir, u.Level))
				}
			}
			seen[p] = true
		}
	}
	for _, p := range pkgs {
		if !seen[p] {
			out = append(out, fmt.Sprintf("package map: package %s is missing", p))
		}
	}
	return out
}

// unitFor returns the unit with the longest Dir that contains rel.
func unitFor(units []Unit, rel string) *Unit {
	var best *Unit
	for i := range units {
		u := &units[i]
		if rel == u.Dir || strings.HasPrefix(rel, u.Dir+"/") {
			if best == nil || len(u.Dir) > len(best.Dir) {
				best = u
			}
		}
	}
	return best
}

func equalSets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// docTable returns the body rows of the first table under the level-2
// heading named heading in the Markdown file at path, each as its
// trimmed cells.
func docTable(t *testing.T, path, heading string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var rows [][]string
	in, header := false, 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if h, ok := strings.CutPrefix(line, "## "); ok {
			if in {
				break
			}
			in = h == heading
			continue
		}
		if !in {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if header > 0 {
				break // the first table has ended
			}
			continue
		}
		if header < 2 { // the heading row and the |---| row
			header++
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	require.NoError(t, s.Err())
	require.NotEmpty(t, rows, "%s: no table under ## %s", path, heading)
	return rows
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	return root
}
