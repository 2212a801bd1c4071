package host_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/host"
)

// A host pins a plugin executable by its SHA-256, launches it, and offers
// its tools as ordinary kernel tools; Close stops its whole process tree.
// Here the executable is the example plugin plugins/examples/wordcount,
// built for the occasion; an operator would pin a digest it recorded
// earlier (spice-orch plugin digest).
func Example() {
	dir, err := os.MkdirTemp("", "wordcount-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	exe := filepath.Join(dir, "wordcount")
	if out, err := exec.Command("go", "build", "-o", exe, "../examples/wordcount").CombinedOutput(); err != nil {
		panic(fmt.Sprint(err, string(out)))
	}
	digest, err := host.Digest(exe)
	if err != nil {
		panic(err)
	}

	p, err := host.Launch(context.Background(), host.Config{Path: exe, SHA256: digest, Name: "wordcount"})
	if err != nil {
		panic(err)
	}
	m := p.Manifest()
	fmt.Println("plugin:", m.Name, m.Version)
	for _, t := range p.Tools() {
		d := t.Definition()
		fmt.Println("tool:", d.Name(), d.Effect())
	}

	call, err := tool.NewCall("call-1", "words.count", []byte(`{"text":"one two three\nfour"}`))
	if err != nil {
		panic(err)
	}
	res, err := p.Tools()[0].Execute(context.Background(), call, nil)
	fmt.Println("result:", res.Content(), err)
	fmt.Println("closed:", p.Close())
	// Output:
	// plugin: wordcount 1.0.0
	// tool: words.count read_only
	// result: {"words":4,"lines":2} <nil>
	// closed: <nil>
}
