package openai

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// chunk is the part of one Chat Completions chunk the stream reads. The
// client library's own chunk type decodes every field of the API (about
// fifty allocations a chunk); this one decodes the dozen the provider
// needs, straight from the event's bytes, and skips the rest.
//
// Byte slices point into the event's data or the decoder's scratch buffer:
// they are valid until the next decode.
type chunk struct {
	id, model []byte
	usage     bool // a usage object was present
	prompt    int64
	output    int64
	choices   []choice
	bad       bool // choices or usage has the wrong type
	errorKey  bool // the chunk is an error event ({"error": ...})
}

type choice struct {
	bad     bool // a field the stream checks has the wrong type
	index   int64
	content []byte
	refusal []byte
	finish  []byte
	calls   []callFragment
}

type callFragment struct {
	index    int64
	id, name []byte
	args     []byte
}

// errChunkSyntax is a chunk that is not one JSON object. Its text never
// quotes the bytes: they come from the server.
var errChunkSyntax = errors.New("openai: a stream chunk is not valid JSON")

// maxChunkDepth bounds the nesting of a chunk's values; encoding/json
// allows 10,000, no chunk needs more than a few.
const maxChunkDepth = 64

// chunkDecoder decodes chunks, reusing its buffers from one to the next.
// The chunk's size is bounded before it gets here: by the SSE scanner's
// line limit and the response's byte limit (Config.MaxResponseBytes).
type chunkDecoder struct {
	data    []byte
	scratch []byte // unescaped strings
	c       chunk
	first   [1]choice // c.choices' first backing: the request asks for one
}

// decode reads data, one chunk object followed only by white space.
func (d *chunkDecoder) decode(data []byte) (*chunk, error) {
	d.data, d.scratch = data, d.scratch[:0]
	c := &d.c
	choices := c.choices[:0]
	if choices == nil {
		choices = d.first[:0]
	}
	*c = chunk{}
	c.choices = choices
	i := d.ws(0)
	if i < len(data) && data[i] == 'n' {
		// A null chunk is an empty one, as for the client library.
		var err error
		if i, err = d.literal(i, "null"); err != nil {
			return nil, err
		}
	} else {
		var err error
		i, err = d.object(i, 0, func(key []byte, i int) (int, error) {
			switch string(key) {
			case "id":
				return d.optString(i, &c.id, nil)
			case "model":
				return d.optString(i, &c.model, nil)
			case "choices":
				c.choices = c.choices[:0]
				return d.array(i, 1, &c.bad, d.choice)
			case "usage":
				c.usage = false
				if d.peek(i) == '{' {
					c.usage = true
				}
				return d.optObject(i, 1, &c.bad, func(key []byte, i int) (int, error) {
					switch string(key) {
					case "prompt_tokens":
						return d.optInt(i, &c.prompt)
					case "completion_tokens":
						return d.optInt(i, &c.output)
					}
					return d.skip(i, 2)
				})
			case "error":
				c.errorKey = true
			}
			return d.skip(i, 1)
		})
		if err != nil {
			return nil, err
		}
	}
	if d.ws(i) != len(data) {
		return nil, errChunkSyntax
	}
	return c, nil
}

func (d *chunkDecoder) choice(i int) (int, error) {
	c := &d.c
	if d.peek(i) != '{' {
		return d.skip(i, 2)
	}
	ch := d.next(&c.choices)
	return d.object(i, 2, func(key []byte, i int) (int, error) {
		switch string(key) {
		case "index":
			return d.optInt(i, &ch.index)
		case "finish_reason":
			return d.optString(i, &ch.finish, &ch.bad)
		case "delta":
			return d.optObject(i, 3, nil, func(key []byte, i int) (int, error) {
				switch string(key) {
				case "content":
					return d.optString(i, &ch.content, &ch.bad)
				case "refusal":
					return d.optString(i, &ch.refusal, nil)
				case "tool_calls":
					ch.calls = ch.calls[:0]
					return d.array(i, 4, &ch.bad, func(i int) (int, error) { return d.call(i, ch) })
				}
				return d.skip(i, 4)
			})
		}
		return d.skip(i, 3)
	})
}

func (d *chunkDecoder) call(i int, ch *choice) (int, error) {
	if d.peek(i) != '{' {
		return d.skip(i, 5)
	}
	ch.calls = append(ch.calls, callFragment{})
	f := &ch.calls[len(ch.calls)-1]
	return d.object(i, 5, func(key []byte, i int) (int, error) {
		switch string(key) {
		case "index":
			return d.optInt(i, &f.index)
		case "id":
			return d.optString(i, &f.id, nil)
		case "function":
			return d.optObject(i, 6, nil, func(key []byte, i int) (int, error) {
				switch string(key) {
				case "name":
					return d.optString(i, &f.name, nil)
				case "arguments":
					return d.optString(i, &f.args, nil)
				}
				return d.skip(i, 7)
			})
		}
		return d.skip(i, 6)
	})
}

// next extends *cs by one zero choice, reusing the slot's fragment slice
// from a chunk decoded earlier, and returns it. The pointer stays valid
// while the choice is read: nothing else is appended to *cs meanwhile.
func (d *chunkDecoder) next(cs *[]choice) *choice {
	n := len(*cs)
	if n < cap(*cs) {
		*cs = (*cs)[:n+1]
		ch := &(*cs)[n]
		*ch = choice{calls: ch.calls[:0]}
		return ch
	}
	*cs = append(*cs, choice{})
	return &(*cs)[n]
}

func (d *chunkDecoder) ws(i int) int {
	for i < len(d.data) {
		switch d.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// peek returns the first byte of the value at i, 0 at the end.
func (d *chunkDecoder) peek(i int) byte {
	if i = d.ws(i); i < len(d.data) {
		return d.data[i]
	}
	return 0
}

// object reads the object at i, calling field with each key and the
// position of its value; field returns the position after the value.
// d.end is the position after the object.
func (d *chunkDecoder) object(i, depth int, field func(key []byte, i int) (int, error)) (int, error) {
	if depth > maxChunkDepth {
		return 0, errChunkSyntax
	}
	i = d.ws(i)
	if i >= len(d.data) || d.data[i] != '{' {
		return 0, errChunkSyntax
	}
	i = d.ws(i + 1)
	if i < len(d.data) && d.data[i] == '}' {
		return i + 1, nil
	}
	for {
		key, j, err := d.str(i)
		if err != nil {
			return 0, err
		}
		j = d.ws(j)
		if j >= len(d.data) || d.data[j] != ':' {
			return 0, errChunkSyntax
		}
		if i, err = field(key, j+1); err != nil {
			return 0, err
		}
		i = d.ws(i)
		if i >= len(d.data) {
			return 0, errChunkSyntax
		}
		switch d.data[i] {
		case ',':
			i = d.ws(i + 1)
		case '}':
			return i + 1, nil
		default:
			return 0, errChunkSyntax
		}
	}
}

// optObject reads an object or null; any other value is skipped and marks
// *bad when bad is not nil.
func (d *chunkDecoder) optObject(i, depth int, bad *bool, field func(key []byte, i int) (int, error)) (int, error) {
	switch d.peek(i) {
	case '{':
		return d.object(i, depth, field)
	case 'n':
		return d.literal(d.ws(i), "null")
	}
	if bad != nil {
		*bad = true
	}
	return d.skip(i, depth)
}

// array reads an array or null, calling elem at each element; any other
// value is skipped and marks *bad.
func (d *chunkDecoder) array(i, depth int, bad *bool, elem func(i int) (int, error)) (int, error) {
	if depth > maxChunkDepth {
		return 0, errChunkSyntax
	}
	i = d.ws(i)
	switch d.peek(i) {
	case '[':
	case 'n':
		return d.literal(i, "null")
	default:
		if bad != nil {
			*bad = true
		}
		return d.skip(i, depth)
	}
	i = d.ws(i + 1)
	if i < len(d.data) && d.data[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = elem(i); err != nil {
			return 0, err
		}
		i = d.ws(i)
		if i >= len(d.data) {
			return 0, errChunkSyntax
		}
		switch d.data[i] {
		case ',':
			i++
		case ']':
			return i + 1, nil
		default:
			return 0, errChunkSyntax
		}
	}
}

// optString reads a string or null into *dst; another value is skipped,
// leaves *dst empty and marks *bad when bad is not nil.
func (d *chunkDecoder) optString(i int, dst *[]byte, bad *bool) (int, error) {
	i = d.ws(i)
	switch d.peek(i) {
	case '"':
		s, j, err := d.str(i)
		*dst = s
		return j, err
	case 'n':
		*dst = nil
		return d.literal(i, "null")
	}
	*dst = nil
	if bad != nil {
		*bad = true
	}
	return d.skip(i, 1)
}

// optInt reads an integer that fits int64; null, another number or another
// value leaves 0, as the client library's lenient decoding did.
func (d *chunkDecoder) optInt(i int, dst *int64) (int, error) {
	i = d.ws(i)
	c := d.peek(i)
	if c != '-' && (c < '0' || c > '9') {
		*dst = 0
		return d.skip(i, 1)
	}
	j, err := d.number(i)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(d.data[i:j]), 10, 64)
	if err != nil {
		n = 0
	}
	*dst = n
	return j, nil
}

func (d *chunkDecoder) literal(i int, lit string) (int, error) {
	if len(d.data)-i < len(lit) || string(d.data[i:i+len(lit)]) != lit {
		return 0, errChunkSyntax
	}
	return i + len(lit), nil
}

// skip checks and steps over the value at i.
func (d *chunkDecoder) skip(i, depth int) (int, error) {
	if depth > maxChunkDepth {
		return 0, errChunkSyntax
	}
	i = d.ws(i)
	if i >= len(d.data) {
		return 0, errChunkSyntax
	}
	switch c := d.data[i]; {
	case c == '"':
		_, j, err := d.str(i)
		return j, err
	case c == '{':
		return d.object(i, depth+1, func(_ []byte, i int) (int, error) { return d.skip(i, depth+1) })
	case c == '[':
		return d.array(i, depth+1, nil, func(i int) (int, error) { return d.skip(i, depth+1) })
	case c == 't':
		return d.literal(i, "true")
	case c == 'f':
		return d.literal(i, "false")
	case c == 'n':
		return d.literal(i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return d.number(i)
	}
	return 0, errChunkSyntax
}

// number steps over a JSON number.
func (d *chunkDecoder) number(i int) (int, error) {
	b := d.data
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, errChunkSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, errChunkSyntax
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, errChunkSyntax
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i, nil
}

// str reads the string at i. A string without escapes and with valid
// UTF-8 is returned in place; any other is unescaped into the scratch
// buffer, with invalid UTF-8 and lone surrogates replaced by U+FFFD, as
// encoding/json does.
func (d *chunkDecoder) str(i int) ([]byte, int, error) {
	b := d.data
	if i >= len(b) || b[i] != '"' {
		return nil, 0, errChunkSyntax
	}
	start := i + 1
	for j := start; j < len(b); {
		c := b[j]
		switch {
		case c == '"':
			return b[start:j], j + 1, nil
		case c == '\\' || c >= utf8.RuneSelf:
			return d.slowStr(start, j)
		case c < 0x20:
			return nil, 0, errChunkSyntax
		}
		j++
	}
	return nil, 0, errChunkSyntax
}

func (d *chunkDecoder) slowStr(start, j int) ([]byte, int, error) {
	b := d.data
	from := len(d.scratch)
	out := append(d.scratch, b[start:j]...)
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			d.scratch = out
			return out[from:], j + 1, nil
		case c < 0x20:
			return nil, 0, errChunkSyntax
		case c == '\\':
			if j+1 >= len(b) {
				return nil, 0, errChunkSyntax
			}
			switch e := b[j+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(b, j+2)
				if !ok {
					return nil, 0, errChunkSyntax
				}
				j += 6
				if utf16.IsSurrogate(r) {
					if r2, ok := hex4(b, j+2); ok && j+1 < len(b) && b[j] == '\\' && b[j+1] == 'u' {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							j += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return nil, 0, errChunkSyntax
			}
			j += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			j++
		default:
			r, n := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && n == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, b[j:j+n]...)
			}
			j += n
		}
	}
	return nil, 0, errChunkSyntax
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
