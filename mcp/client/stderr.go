package client

import (
	"bufio"
	"io"
	"slices"
	"sync"
)

// maxStderrLine bounds one kept stderr line; longer lines are cut.
const maxStderrLine = 1 << 10

// tail keeps the last lines of a server's stderr within a line count and
// a byte total. Reading never stops, so the server never blocks on a full
// pipe.
type tail struct {
	maxLines, maxBytes int

	mu    sync.Mutex
	lines []string
	bytes int
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	t.bytes += len(line)
	for len(t.lines) > t.maxLines || t.bytes > t.maxBytes {
		t.bytes -= len(t.lines[0])
		t.lines = t.lines[1:]
	}
	if cap(t.lines) > 4*t.maxLines {
		t.lines = slices.Clone(t.lines)
	}
}

func (t *tail) snapshot() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.lines)
}

// read consumes r until EOF with bounded memory.
func (t *tail) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxStderrLine)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		if adv == 0 && tok == nil && len(data) >= maxStderrLine {
			// A line longer than the bound: keep its start, drop the rest.
			return len(data), append(data[:maxStderrLine:maxStderrLine], " [cut]"...), nil
		}
		return adv, tok, err
	})
	for sc.Scan() {
		t.add(sc.Text())
	}
	_, _ = io.Copy(io.Discard, r)
}
