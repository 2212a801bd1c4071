package eventlog

// Object writes one canonical JSON object field by field, or only measures
// it. A payload describes its fields once, in a fixed order, and runs that
// description against both modes, so AppendJSON and EncodedLen cannot drift:
//
//	func (p Thing) fields(o *eventlog.Object) {
//		o.String("name", p.Name)
//		o.Int("count", int64(p.Count))
//	}
//	func (p Thing) AppendJSON(dst []byte) []byte {
//		o := eventlog.AppendObject(dst)
//		p.fields(&o)
//		return o.End()
//	}
//	func (p Thing) EncodedLen() int {
//		o := eventlog.MeasureObject()
//		p.fields(&o)
//		return o.Len()
//	}
//
// Field names are written without escaping: use lower-case ASCII letters,
// digits and '_'.
type Object struct {
	buf     []byte
	n       int  // bytes written or measured since the opening brace
	measure bool // count bytes only
	more    bool // a field precedes the next one at this depth
	open    int  // objects not yet closed, the outermost included
}

// AppendObject starts an object at the end of dst.
func AppendObject(dst []byte) Object {
	return Object{buf: append(dst, '{'), n: 1, open: 1}
}

// MeasureObject starts an object that only counts its encoded length.
func MeasureObject() Object { return Object{n: 1, measure: true, open: 1} }

func (o *Object) raw(s string) {
	o.n += len(s)
	if !o.measure {
		o.buf = append(o.buf, s...)
	}
}

// key writes the field name as is: names are plain ASCII that JSON needs
// no escape for, which keeps measuring cheap on the append path.
func (o *Object) key(name string) {
	comma := 0
	if o.more {
		comma = 1
	}
	o.more = true
	o.n += comma + len(name) + 3
	if !o.measure {
		if comma == 1 {
			o.buf = append(o.buf, ',')
		}
		o.buf = append(o.buf, '"')
		o.buf = append(o.buf, name...)
		o.buf = append(o.buf, '"', ':')
	}
}

// String writes a string field.
func (o *Object) String(name, v string) {
	o.key(name)
	if o.measure {
		o.n += StringLen(v)
		return
	}
	start := len(o.buf)
	o.buf = AppendString(o.buf, v)
	o.n += len(o.buf) - start
}

// OptionalString writes a string field unless v is empty. A canonical
// encoding never contains the empty form of an optional field.
func (o *Object) OptionalString(name, v string) {
	if v != "" {
		o.String(name, v)
	}
}

// Int writes an integer field.
func (o *Object) Int(name string, v int64) {
	o.key(name)
	if o.measure {
		o.n += IntLen(v)
		return
	}
	start := len(o.buf)
	o.buf = AppendInt(o.buf, v)
	o.n += len(o.buf) - start
}

// Uint writes an unsigned integer field.
func (o *Object) Uint(name string, v uint64) {
	o.key(name)
	if o.measure {
		o.n += UintLen(v)
		return
	}
	start := len(o.buf)
	o.buf = AppendUint(o.buf, v)
	o.n += len(o.buf) - start
}

// Bool writes a boolean field.
func (o *Object) Bool(name string, v bool) {
	o.key(name)
	if o.measure {
		o.n += BoolLen(v)
		return
	}
	o.buf = AppendBool(o.buf, v)
	o.n += BoolLen(v)
}

// Raw writes a field whose value is already canonical JSON, such as a
// payload relayed from another log.
func (o *Object) Raw(name string, v Raw) {
	o.key(name)
	o.raw(v.s)
}

// Begin opens a nested object field; End closes it.
func (o *Object) Begin(name string) {
	o.key(name)
	o.raw("{")
	o.more = false
	o.open++
}

// End closes the innermost open object and returns the bytes written so far
// (nil when measuring). Calling End on the outermost object finishes it.
func (o *Object) End() []byte {
	if o.open > 0 {
		o.raw("}")
		o.more = true
		o.open--
	}
	return o.buf
}

// Len returns the encoded length of the whole object, counting the closing
// braces End has not written yet, so a measuring description need not call
// End.
func (o *Object) Len() int { return o.n + o.open }
