package client

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

// A Node server's entry is not executed from its path: Node would read
// the file again after it was verified, and a file renamed over it in
// between would run unchecked. The verified bytes are copied into a
// private directory, hashed there once the copy is closed, and a module
// hook (module.register, given with --import) hands Node the copy's
// bytes when it loads the entry. The entry keeps its own URL, so its
// relative imports, its package scope and its node_modules resolve as
// they would from its folder. Only the entry is covered: the modules it
// imports are read from their paths (the lock file pins which versions
// they are, not their bytes).

var nodeName = regexp.MustCompile(`^node(js)?[0-9.]*$`)

// isNode reports whether the interpreter at path is Node, by its name.
func isNode(path string) bool { return nodeName.MatchString(filepath.Base(path)) }

// hooksJS loads the private copy in place of the entry, and refuses to
// run if the main module resolved to anything else.
const hooksJS = `import { readFileSync } from "node:fs";
let target, copy, main = false;
export function initialize(d) { target = d.target; copy = d.copy; }
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  if (!main && context.parentURL === undefined) {
    main = true;
    if (r.url !== target) throw new Error("spice-orch: the entry resolved to " + r.url + ", not the pinned " + target);
  }
  return r;
}
export async function load(url, context, next) {
  if (url !== target) return next(url, context);
  // The default loader only names the format (module or commonjs): the
  // bytes it read are not used.
  const format = context.format ?? (await next(url, context)).format;
  return { format, source: readFileSync(copy), shortCircuit: true };
}
`

// nodeEntry is the private directory of one server's entry.
type nodeEntry struct {
	dir  string
	args []string // Node's arguments before the server's own
}

// privateEntry copies the verified entry f into a new private directory
// and returns the arguments that make Node run the copy in its place.
func privateEntry(c Config, f *os.File) (*nodeEntry, error) {
	real, err := filepath.EvalSymlinks(c.Entry.Path)
	if err != nil {
		return nil, &ConnectError{Server: c.Name, Kind: ErrStartup, Reason: "entry: " + err.Error(), Err: err}
	}
	dir, err := os.MkdirTemp("", "spice-orch-mcp-entry-")
	if err != nil {
		return nil, &ConnectError{Server: c.Name, Kind: ErrStartup, Reason: "private entry: " + err.Error(), Err: err}
	}
	ne := &nodeEntry{dir: dir}
	fail := func(err error) (*nodeEntry, error) {
		ne.remove()
		var ce *ConnectError
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, &ConnectError{Server: c.Name, Kind: ErrStartup, Reason: "private entry: " + err.Error(), Err: err}
	}
	cp := filepath.Join(dir, "entry")
	out, err := os.OpenFile(cp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o400)
	if err != nil {
		return fail(err)
	}
	_, err = io.Copy(out, io.NewSectionReader(f, 0, c.MaxFileBytes))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	// Hashed once closed, in a directory only this user can write: what
	// Node reads is what was pinned.
	vf, err := verifyPin(c, "entry", cp, c.Entry.SHA256)
	if err != nil {
		return fail(err)
	}
	vf.Close()
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	hooks := filepath.Join(dir, "hooks.mjs")
	register := filepath.Join(dir, "register.mjs")
	reg := `import { register } from "node:module";
import { pathToFileURL } from "node:url";
register(pathToFileURL(` + q(hooks) + `).href, { data: { target: pathToFileURL(` + q(real) + `).href, copy: ` + q(cp) + ` } });
`
	for name, body := range map[string]string{hooks: hooksJS, register: reg} {
		if err := os.WriteFile(name, []byte(body), 0o400); err != nil {
			return fail(err)
		}
	}
	ne.args = []string{"--import", register, real}
	return ne, nil
}

func (ne *nodeEntry) remove() {
	if ne != nil {
		_ = os.RemoveAll(ne.dir)
	}
}
