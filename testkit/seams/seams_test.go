package seams

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Module is the module path the package paths are relative to.
const Module = "github.com/strand-io/strand"

type listed struct {
	Path  string // relative to Module
	Dir   string // relative to the module root
	Files []string
}

// serverPackages lists ServerPackages with `go list` (GoFiles: non-test
// files for this platform and build tags).
func serverPackages(t *testing.T) (string, []listed) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"list", "-f", "{{.ImportPath}}|{{.Dir}}|{{join .GoFiles \",\"}}"}
	for _, p := range ServerPackages {
		args = append(args, "./"+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, msg)
	}
	var pkgs []listed
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "|", 3)
		if len(parts) != 3 {
			t.Fatalf("go list line %q", line)
		}
		dir, err := filepath.Rel(root, parts[1])
		if err != nil {
			t.Fatal(err)
		}
		p := listed{Path: strings.TrimPrefix(strings.TrimPrefix(parts[0], Module), "/"), Dir: dir}
		if parts[2] != "" {
			p.Files = strings.Split(parts[2], ",")
		}
		pkgs = append(pkgs, p)
	}
	return root, pkgs
}

// TestSeams parses every non-test file of the server packages and fails on
// each call around a seam that Allowed does not name, and on each Allowed
// entry that names no call any more.
func TestSeams(t *testing.T) {
	root, pkgs := serverPackages(t)
	if len(pkgs) < 15 {
		t.Fatalf("go list found only %d server packages", len(pkgs))
	}
	var all []Violation
	for _, p := range pkgs {
		fset := token.NewFileSet()
		var files []File
		for _, name := range p.Files {
			rel := filepath.ToSlash(filepath.Join(p.Dir, name))
			f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, File{Name: rel, AST: f})
		}
		all = append(all, Check(fset, p.Path, files)...)
	}
	left, stale := Filter(all, Allowed)
	for _, v := range left {
		t.Errorf("%s (in %s %s)", v, v.Pkg, v.Func)
	}
	for _, a := range stale {
		t.Errorf("allowlist entry {%s %s %s} matches no call any more: remove it", a.Pkg, a.Func, a.Kind)
	}
}

// TestCheckCatchesCalls runs the checker on small sources, so a passing
// TestSeams means something: a net.Dial in a server package is reported
// (and is let through only by an entry naming its function), as is each
// other kind; a name shadowing an import, and a clock read with no clock
// in reach, are not.
func TestCheckCatchesCalls(t *testing.T) {
	const src = `package replication

import (
	"net"
	fs "os"
	"time"

	"github.com/strand-io/strand/clock"
)

type Manager struct{ clk clock.Clock }

func (m *Manager) connect(addr string) (net.Conn, error) { return net.Dial("tcp", addr) }

func (m *Manager) save(p string) error { return fs.WriteFile(p, nil, 0o644) }

func (m *Manager) deadline() time.Time { return time.Now().Add(time.Second) }

func open(c clock.Clock) time.Duration { return time.Since(c.Now()) }

func free() time.Time { return time.Now() }

func shadow(net struct{ Dial func() }) { net.Dial() }

var dialer net.Dialer
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "snippet.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := Check(fset, "replication", []File{{Name: "replication/snippet.go", AST: f}})
	var lines []string
	for _, v := range got {
		lines = append(lines, v.String())
	}
	want := []string{
		"replication/snippet.go:13: net.Dial — " + RuleNet,
		"replication/snippet.go:15: fs.WriteFile — " + RuleFS,
		"replication/snippet.go:17: time.Now — " + RuleClock,
		"replication/snippet.go:19: time.Since — " + RuleClock,
		"replication/snippet.go:25: net.Dialer — " + RuleNet,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Check reported\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	allow := []Allow{
		{"replication", "Manager.connect", "net", "the default dialer"},
		{"replication", "Manager.connect", "fs", "wrong kind: covers nothing"},
	}
	left, stale := Filter(got, allow)
	if len(left) != 4 || left[0].Call != "fs.WriteFile" {
		t.Errorf("Filter left %v, want the four calls other than net.Dial", left)
	}
	if len(stale) != 1 || stale[0].Kind != "fs" {
		t.Errorf("Filter stale = %v, want the fs entry", stale)
	}
	if left, _ := Filter(got, nil); len(left) != len(got) {
		t.Errorf("with no allowlist Filter let %d of %d through", len(got)-len(left), len(got))
	}
}
