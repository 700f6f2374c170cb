package floors

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goList runs `go list` in the module root with a template of one line
// per package and returns the lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", args, err, msg)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func stdNames(t *testing.T) map[string]bool {
	names := map[string]bool{}
	for _, p := range goList(t, "std") {
		if strings.Contains(p, "internal") || strings.HasPrefix(p, "vendor/") {
			continue
		}
		names[p[strings.LastIndex(p, "/")+1:]] = true
	}
	return names
}

func modulePackages(t *testing.T) []Package {
	var pkgs []Package
	for _, line := range goList(t, "-f", "{{.ImportPath}}|{{.Name}}|{{join .Imports \",\"}}", "./...") {
		parts := strings.SplitN(line, "|", 3)
		if len(parts) != 3 {
			t.Fatalf("go list line %q", line)
		}
		p := Package{Path: rel(parts[0]), Name: parts[1]}
		for _, imp := range strings.Split(parts[2], ",") {
			if imp == Module || strings.HasPrefix(imp, Module+"/") {
				p.Imports = append(p.Imports, rel(imp))
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, Module), "/")
}

// TestFloorPlan holds the real imports of every package against Plan.
func TestFloorPlan(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, breach := range Check(Plan, pkgs, stdNames(t)) {
		t.Error(breach)
	}
}

// TestCheckCatchesBreaches shows the checker fails on each kind of breach,
// so a passing TestFloorPlan means something.
func TestCheckCatchesBreaches(t *testing.T) {
	std := map[string]bool{"log": true, "errors": true}
	ok := []Package{
		{Path: "errs", Name: "errs", Imports: []string{"proto/strand/v1"}},
		{Path: "broker", Name: "broker", Imports: []string{"broker/storage", "record", "metadata"}},
		{Path: "client", Name: "client", Imports: []string{"record", "internal/wire"}},
		{Path: "app/workload", Name: "workload", Imports: []string{"client", "app/verify", "record"}},
		{Path: "testkit/hostile", Name: "hostile", Imports: []string{"node", "client", "api"}},
	}
	if got := Check(Plan, ok, std); len(got) != 0 {
		t.Fatalf("a plan-abiding set was refused: %v", got)
	}
	cases := []struct {
		name string
		pkg  Package
		want string
	}{
		{"up a floor", Package{Path: "broker", Name: "broker", Imports: []string{"api"}}, "a floor above it"},
		{"replication reaches the controller's Raft owner? no: controller is below", Package{Path: "metadata", Name: "metadata", Imports: []string{"controller"}}, "a floor above it"},
		{"SDK beyond its reach", Package{Path: "client", Name: "client", Imports: []string{"broker"}}, "reaches only"},
		{"application into internal", Package{Path: "app/perf", Name: "perf", Imports: []string{"internal/wire"}}, "public packages only"},
		{"application into the server", Package{Path: "app/drill", Name: "drill", Imports: []string{"node"}}, "reaches only"},
		{"on no floor", Package{Path: "misc", Name: "misc"}, "on no floor"},
		{"shadows the standard library", Package{Path: "broker/storage", Name: "log"}, "standard-library"},
	}
	for _, c := range cases {
		got := Check(Plan, []Package{c.pkg}, std)
		if len(got) != 1 || !strings.Contains(got[0], c.want) {
			t.Errorf("%s: Check = %q, want one breach containing %q", c.name, got, c.want)
		}
	}
}
