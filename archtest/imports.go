package archtest

import (
	"fmt"
	"strconv"
	"strings"
)

// kernelImport returns why a kernel file may not import path, or "".
func (c *checker) kernelImport(path string, test bool) string {
	switch {
	case c.inKernel(path):
		return ""
	case c.inModule(path):
		return fmt.Sprintf("imports %q, a package of this module outside the kernel; "+
			"the kernel imports only kernel packages and the standard library", path)
	case c.isStd(path):
		if test || c.kernelStd[path] {
			return ""
		}
		return fmt.Sprintf("imports %q, which is not on the kernel allow-list of standard-library packages (archtest.KernelStd)", path)
	case test:
		if c.isTestLib(path) {
			return ""
		}
		return fmt.Sprintf("imports %q, a third-party package; kernel tests import only kernel packages, "+
			"the standard library and the test libraries (archtest.TestLibraries)", path)
	default:
		return fmt.Sprintf("imports %q, a third-party package; the kernel imports only kernel packages "+
			"and the allow-listed standard library", path)
	}
}

func (c *checker) inKernel(path string) bool {
	if !c.inModule(path) {
		return false
	}
	u := c.unitOf(c.rel(path))
	return u != nil && u.Kernel
}

// layerImport returns why a file of unit u in folder rel may not import
// path, or "".
func (c *checker) layerImport(u *Unit, rel, path string, test bool) string {
	if !c.inModule(path) {
		if c.isStd(path) || u.ThirdParty || test && c.isTestLib(path) {
			return ""
		}
		what := "the standard library"
		if test {
			what += " and the test libraries (archtest.TestLibraries)"
		}
		return fmt.Sprintf("imports %q, a third-party package, but %s may import only the module folders %s and %s",
			path, describe(u), mayList(u), what)
	}
	target := c.rel(path)
	t := c.unitOf(target)
	switch {
	case t == nil:
		return fmt.Sprintf("imports %q, whose folder is not in the layer table", path)
	case t == u:
		if !u.Isolated || adapter(u, rel) == adapter(u, target) || adapter(u, target) == u.Dir+"/internal" {
			return ""
		}
		return fmt.Sprintf("imports %q, but adapters do not import each other: %s may import only its own packages and %s/internal/...",
			path, adapter(u, rel), u.Dir)
	case c.mayImport[u.Dir][t.Dir], test && t.Level > 0 && t.Level < u.Level:
		return ""
	}
	msg := fmt.Sprintf("imports %q from %s, but %s may import only %s", path, describe(t), describe(u), mayList(u))
	if test {
		msg += "; its tests may also import lower layers"
	}
	return msg
}

// adapter returns the adapter folder of rel inside isolated unit u: the
// unit's folder plus one element ("providers/openai").
func adapter(u *Unit, rel string) string {
	rest, ok := strings.CutPrefix(rel, u.Dir+"/")
	if !ok {
		return u.Dir
	}
	first, _, _ := strings.Cut(rest, "/")
	return u.Dir + "/" + first
}

func describe(u *Unit) string {
	if u.Level == 0 {
		return u.Dir + ", outside the layer table"
	}
	return u.Dir + " (layer " + strconv.Itoa(u.Level) + ")"
}

func mayList(u *Unit) string {
	if len(u.MayImport) == 0 {
		return "its own packages"
	}
	return strings.Join(u.MayImport, ", ")
}

// checkKernelDeps holds the positive rule: every package a kernel package
// depends on, however indirectly, is standard library or kernel.
func (c *checker) checkKernelDeps(p *listedPackage, rel string) {
	for _, dep := range p.Deps {
		if c.inKernel(dep) || !c.inModule(dep) && c.isStd(dep) {
			continue
		}
		c.report(Violation{
			Rule: RuleKernelDeps, File: rel, Subject: dep,
			Message: fmt.Sprintf("package %s depends on %q (directly or through its imports), "+
				"which is neither standard library nor kernel", p.ImportPath, dep),
		})
	}
}
