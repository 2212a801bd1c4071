package archtest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocLinksResolve holds every relative link of README.md, CONTRACTS.md
// and docs/*.md to an existing file, and a #fragment to a heading of the
// Markdown file it points to.
func TestDocLinksResolve(t *testing.T) {
	root := moduleRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "docs/*.md")
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "CONTRACTS.md"))
	for _, f := range files {
		for _, p := range linkProblems(f) {
			t.Error(p)
		}
	}
}

// TestLinkCheckerCatchesBrokenLinks shows linkProblems failing on a missing
// file and a missing anchor, and passing on good ones and code.
func TestLinkCheckerCatchesBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	write("docs/other.md", "# Other\n\n## The store: `runs`\n\n## Twice\n\n## Twice\n")
	good := write("good.md", "See [a](docs/other.md#the-store-runs), [b](docs/other.md#twice-1),\n"+
		"[c](#top-heading), [d](https://example.com/x), ![e](docs/other.md).\n\n# Top heading\n\n"+
		"```\n[not a link](missing.md)\n```\n\nand `[code](missing.md)`.\n")
	require.Empty(t, linkProblems(good))

	for name, text := range map[string]string{
		"file":   "[x](docs/missing.md)\n",
		"anchor": "[x](docs/other.md#no-such-heading)\n",
		"self":   "# Top\n\n[x](#bottom)\n",
		"image":  "![x](missing.png)\n",
	} {
		p := write(name+".md", text)
		require.Len(t, linkProblems(p), 1, name)
	}
}

var (
	mdLink     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
	nonSlug    = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
)

// linkProblems returns a line for every relative link of the Markdown file
// at path that does not resolve. Links in code blocks and code spans are
// not links.
func linkProblems(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	fence := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
			}
			where := fmt.Sprintf("%s:%d: link %s", path, i+1, target)
			if _, err := os.Stat(dest); err != nil {
				out = append(out, where+": no such file")
				continue
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			anchors, err := markdownAnchors(dest)
			if err != nil {
				out = append(out, where+": "+err.Error())
			} else if !anchors[frag] {
				out = append(out, where+": no heading with that anchor")
			}
		}
	}
	return out
}

// markdownAnchors returns the anchors GitHub gives the headings of the
// Markdown file at path: lower case, punctuation dropped, spaces as
// hyphens, and -1, -2, … after a repeated one.
func markdownAnchors(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	anchors := make(map[string]bool)
	count := make(map[string]int)
	fence := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		slug := strings.ReplaceAll(nonSlug.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		if n := count[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		count[slug]++
	}
	return anchors, nil
}
