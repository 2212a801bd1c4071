package host

import (
	"bufio"
	"io"
	"slices"
	"sync"
)

// tail keeps the last lines of a plugin's stderr within a line count and a
// byte total; longer lines are cut. Reading never stops, so the plugin
// never blocks on a full pipe.
type tail struct {
	maxLines, maxBytes, maxLine int

	mu      sync.Mutex
	lines   []string
	bytes   int
	dropped uint64
}

func (t *tail) add(line string) {
	if len(line) > t.maxLine {
		line = line[:t.maxLine] + " [cut]"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	t.bytes += len(line)
	for len(t.lines) > t.maxLines || t.bytes > t.maxBytes {
		t.bytes -= len(t.lines[0])
		t.lines[0] = ""
		t.lines = t.lines[1:]
		t.dropped++
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

// read consumes r until EOF, line by line, with bounded memory.
func (t *tail) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 4096)
	var cur []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(cur) <= t.maxLine {
			cur = append(cur, frag[:min(len(frag), t.maxLine+1-len(cur))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if n := len(cur); n > 0 && cur[n-1] == '\n' {
			cur = cur[:n-1]
		}
		if len(cur) > 0 || err == nil {
			t.add(string(cur))
		}
		cur = cur[:0]
		if err != nil {
			return
		}
	}
}
