// Package seams holds the server to its seams. The cluster simulation runs
// every node in one process on an in-memory network (testkit/memnet), and
// unit tests hand components a fake clock (clock.Fake); both work only if
// the server reaches the network, the file system and the clock through the
// seams it is given and not around them. Check parses source files and
// reports each call that goes around a seam:
//
//   - net: net.Dial, net.DialTimeout, net.DialTCP, net.DialUDP, net.Listen,
//     net.ListenTCP, net.ListenUDP, net.ListenPacket, tls.Dial,
//     tls.DialWithDialer, tls.Listen, and any use of the types net.Dialer and
//     tls.Dialer (their Dial and DialContext reach the real network; the AST
//     has no types, so the type itself is the mark).
//   - fs: os.Open, os.OpenFile, os.Create, os.CreateTemp, os.Rename,
//     os.Remove, os.RemoveAll, os.Mkdir, os.MkdirAll, os.MkdirTemp,
//     os.ReadFile, os.WriteFile, os.ReadDir, os.Truncate.
//   - clock: time.Now, time.Since, time.Until in a function that has a
//     clock.Clock in reach: a method whose receiver type has a clock.Clock
//     field, or a function taking a clock.Clock parameter. That component
//     was handed a clock; reading the time package beside it makes a fake
//     clock lie (a deadline set on one clock and checked on the other).
//     Functions with no clock in reach are not held: the simulation's time
//     seam is the synctest bubble, inside which the time package is virtual.
//     Timers (time.NewTimer, time.After) are not held either, for that
//     reason.
//
// A call at a seam's own implementation (the default listener, the default
// dialer, the real file system) is allowed only by an Allow entry naming its
// package and enclosing function, with a reason. TestSeams (seams_test.go)
// runs Check over the server packages with Allowed and also fails on an
// entry that no longer matches a call, so the list shrinks as seams close.
package seams

import (
	"fmt"
	"go/ast"
	"go/token"
	"sort"
	"strconv"
	"strings"
)

// Rule names.
const (
	RuleNet   = "net: reach the network through the node's listener and dialer seams"
	RuleFS    = "fs: reach files through the component's file-system seam"
	RuleClock = "clock: this component holds a clock.Clock; read time from it"
)

// ServerPackages are the packages (relative to the module; a trailing
// "/..." holds everything under the folder) held to the seams.
var ServerPackages = []string{
	"broker/...", "replication", "controller", "coordinator/...", "node", "request", "api/...",
	"metadata", "quota", "authz", "internal/gossip", "record", "internal/wire",
}

// forbidden maps an import path to its names that go around a seam, each
// with its rule. Clock names apply only to packages handed a clock.
var forbidden = map[string]map[string]string{
	"net": {
		"Dial": RuleNet, "DialTimeout": RuleNet, "DialTCP": RuleNet, "DialUDP": RuleNet,
		"Listen": RuleNet, "ListenTCP": RuleNet, "ListenUDP": RuleNet, "ListenPacket": RuleNet,
		"Dialer": RuleNet,
	},
	"crypto/tls": {"Dial": RuleNet, "DialWithDialer": RuleNet, "Listen": RuleNet, "Dialer": RuleNet},
	"os": {
		"Open": RuleFS, "OpenFile": RuleFS, "Create": RuleFS, "CreateTemp": RuleFS,
		"Rename": RuleFS, "Remove": RuleFS, "RemoveAll": RuleFS, "Mkdir": RuleFS, "MkdirAll": RuleFS,
		"MkdirTemp": RuleFS, "ReadFile": RuleFS, "WriteFile": RuleFS, "ReadDir": RuleFS, "Truncate": RuleFS,
	},
	"time": {"Now": RuleClock, "Since": RuleClock, "Until": RuleClock},
}

// clockImport is the import path whose Clock type marks a package as
// handed a clock.
const clockImport = "github.com/strand-io/strand/clock"

// File is one parsed non-test Go file of a package.
type File struct {
	Name string // path shown in reports, e.g. "broker/storage/log.go"
	AST  *ast.File
}

// Violation is one call around a seam.
type Violation struct {
	Pkg  string // package path relative to the module
	Func string // enclosing function: "F", "T.M", or "" at package level
	Pos  token.Position
	Call string // e.g. "net.Dial"
	Rule string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s:%d: %s — %s", v.Pos.Filename, v.Pos.Line, v.Call, v.Rule)
}

// Allow lets calls of one rule kind (net, fs or clock) in one function of
// one package go around the seam: they are the seam's implementation, or a
// use the rule does not mean to catch.
type Allow struct {
	Pkg    string // package path relative to the module
	Func   string // "F" or "T.M" ("*T" is written "T"); "" for package-level
	Kind   string // "net", "fs" or "clock"
	Reason string
}

func kind(rule string) string { return rule[:strings.Index(rule, ":")] }

// isClock reports whether expr is clock.Clock (or *clock.Clock) with the
// clock package imported as name.
func isClock(expr ast.Expr, name string) bool {
	if st, ok := expr.(*ast.StarExpr); ok {
		expr = st.X
	}
	sel, ok := expr.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Clock" {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == name
}

// clockedTypes returns the names of the package's struct types that have a
// clock.Clock field.
func clockedTypes(files []File) map[string]bool {
	types := map[string]bool{}
	for _, f := range files {
		name, ok := importName(f.AST, clockImport)
		if !ok {
			continue
		}
		ast.Inspect(f.AST, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				for _, fld := range st.Fields.List {
					if isClock(fld.Type, name) {
						types[ts.Name.Name] = true
					}
				}
			}
			return false
		})
	}
	return types
}

// hasClock reports whether decl is a function with a clock.Clock in reach:
// its receiver's type is in types, or it takes a clock.Clock parameter.
func hasClock(f *ast.File, decl ast.Decl, types map[string]bool) bool {
	fd, ok := decl.(*ast.FuncDecl)
	if !ok {
		return false
	}
	if name := funcName(decl); strings.Contains(name, ".") && types[name[:strings.Index(name, ".")]] {
		return true
	}
	clk, ok := importName(f, clockImport)
	if !ok {
		return false
	}
	for _, p := range fd.Type.Params.List {
		if isClock(p.Type, clk) {
			return true
		}
	}
	return false
}

// importName returns the name path is imported under in f.
func importName(f *ast.File, path string) (string, bool) {
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil || p != path {
			continue
		}
		if imp.Name != nil {
			if imp.Name.Name == "_" || imp.Name.Name == "." {
				return "", false
			}
			return imp.Name.Name, true
		}
		return p[strings.LastIndex(p, "/")+1:], true
	}
	return "", false
}

// Check reports every use of a forbidden name in the files of package pkg.
// It does not consult an allowlist; see Filter.
func Check(fset *token.FileSet, pkg string, files []File) []Violation {
	types := clockedTypes(files)
	var out []Violation
	for _, f := range files {
		names := map[string]string{} // local import name -> import path
		for path := range forbidden {
			if n, ok := importName(f.AST, path); ok {
				names[n] = path
			}
		}
		if len(names) == 0 {
			continue
		}
		for _, decl := range f.AST.Decls {
			fn := funcName(decl)
			clocked := hasClock(f.AST, decl, types)
			ast.Inspect(decl, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				id, ok := sel.X.(*ast.Ident)
				// id.Obj == nil: not a local variable or parameter that
				// shadows the import's name.
				if !ok || id.Obj != nil {
					return true
				}
				path, ok := names[id.Name]
				if !ok {
					return true
				}
				rule, ok := forbidden[path][sel.Sel.Name]
				if !ok || (rule == RuleClock && !clocked) {
					return true
				}
				pos := fset.Position(sel.Pos())
				pos.Filename = f.Name
				out = append(out, Violation{Pkg: pkg, Func: fn, Pos: pos, Call: id.Name + "." + sel.Sel.Name, Rule: rule})
				return true
			})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pos.Filename != out[j].Pos.Filename {
			return out[i].Pos.Filename < out[j].Pos.Filename
		}
		return out[i].Pos.Line < out[j].Pos.Line
	})
	return out
}

// funcName names a top-level declaration: "F", "T.M", or "" for a
// package-level var, const or type.
func funcName(decl ast.Decl) string {
	fd, ok := decl.(*ast.FuncDecl)
	if !ok {
		return ""
	}
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// Filter splits violations into those no entry of allow covers, and
// returns too the entries that covered nothing (stale: the call they
// allowed is gone, so the entry should go as well).
func Filter(vs []Violation, allow []Allow) (left []Violation, stale []Allow) {
	used := make([]bool, len(allow))
	for _, v := range vs {
		covered := false
		for i, a := range allow {
			if a.Pkg == v.Pkg && a.Func == v.Func && a.Kind == kind(v.Rule) {
				used[i] = true
				covered = true
			}
		}
		if !covered {
			left = append(left, v)
		}
	}
	for i, a := range allow {
		if !used[i] {
			stale = append(stale, a)
		}
	}
	return left, stale
}
