// Package floors is the floor plan of the repository as a table: which
// packages stand on which floor, and which floors each may import. A
// package imports only packages on its own floor or below; a few floors
// reach less far than that (the SDK and the applications use public
// packages only, so a program outside this module can do what they do).
//
// TestFloorPlan (floors_test.go) reads the real imports with `go list` and
// fails on any import that runs up a floor, on a package that no floor
// holds, and on a package named like a standard-library package.
// docs/ARCHITECTURE.md ("Floors") draws the same table for readers.
package floors

import (
	"fmt"
	"sort"
	"strings"
)

// Module is the module path every package path below is relative to.
const Module = "github.com/strand-io/strand"

// Floor is one storey of the plan.
type Floor struct {
	Name string
	// Packages are paths relative to Module; a trailing "/..." holds
	// everything under that folder.
	Packages []string
	// Reach, if set, names the only floors this one may import (its own
	// included when listed). Empty: every floor up to and including its own.
	Reach []string
	// PublicOnly: this floor may not import packages under internal/.
	PublicOnly bool
}

// Plan is the floor plan, bottom first.
var Plan = []Floor{
	{Name: "ground", Packages: []string{
		"proto/strand/v1", "errs", "record", "clock", "broker/storage/vfs",
		"internal/config", "internal/wire", "internal/gossip", "internal/planted", "internal/syncx", "internal/auth",
		"internal/certs", "internal/tlsconf", "internal/scram",
	}},
	{Name: "metadata", Packages: []string{"metadata", "metadata/metadatatest"}},
	{Name: "controller", Packages: []string{"controller", "controller/channel"}},
	{Name: "partition", Packages: []string{"broker/storage", "broker/storage/storagetest", "broker"}},
	{Name: "replication", Packages: []string{"replication"}},
	{Name: "coordinators", Packages: []string{"coordinator", "coordinator/txn", "coordinator/group"}},
	{Name: "authorizer", Packages: []string{"authz"}},
	{Name: "request layer", Packages: []string{"request", "quota"}},
	{Name: "front doors", Packages: []string{"api", "api/kafka"}},
	{Name: "console", Packages: []string{"console"}},
	{Name: "composition root", Packages: []string{"node"}},
	{Name: "SDK", Packages: []string{"client"}, Reach: []string{"ground", "SDK"}},
	{Name: "applications", Packages: []string{"app/..."}, Reach: []string{"ground", "SDK", "applications"}, PublicOnly: true},
	{Name: "command", Packages: []string{"cmd/..."}},
	{Name: "test kit", Packages: []string{"testkit/..."}},
}

// Package is what Check needs of one package: its path relative to
// Module, its name, and the module's packages it imports (also relative),
// test-only imports excluded.
type Package struct {
	Path    string
	Name    string
	Imports []string
}

// FloorOf returns the index in plan of the floor that holds path, or -1.
func FloorOf(plan []Floor, path string) int {
	for i, f := range plan {
		for _, p := range f.Packages {
			if dir, ok := strings.CutSuffix(p, "/..."); ok {
				if path == dir || strings.HasPrefix(path, dir+"/") {
					return i
				}
			} else if path == p {
				return i
			}
		}
	}
	return -1
}

// Check returns one line per breach of plan by pkgs: a package on no
// floor, an import that runs up a floor or beyond a floor's reach, an
// internal/ import from a public-only floor, and a package named like a
// standard-library package (stdNames: the last elements of the standard
// library's public import paths).
func Check(plan []Floor, pkgs []Package, stdNames map[string]bool) []string {
	var out []string
	floorIndex := map[string]int{}
	for i, f := range plan {
		floorIndex[f.Name] = i
	}
	for _, p := range pkgs {
		if p.Name != "main" && stdNames[p.Name] {
			out = append(out, fmt.Sprintf("%s: package %s is named like a standard-library package", p.Path, p.Name))
		}
		fi := FloorOf(plan, p.Path)
		if fi < 0 {
			out = append(out, fmt.Sprintf("%s: on no floor (add it to floors.Plan)", p.Path))
			continue
		}
		f := plan[fi]
		for _, imp := range p.Imports {
			di := FloorOf(plan, imp)
			switch {
			case di < 0:
				out = append(out, fmt.Sprintf("%s imports %s, which is on no floor", p.Path, imp))
			case len(f.Reach) > 0 && !contains(f.Reach, plan[di].Name):
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s): the %s floor reaches only %s",
					p.Path, f.Name, imp, plan[di].Name, f.Name, strings.Join(f.Reach, ", ")))
			case di > fi:
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s), a floor above it",
					p.Path, f.Name, imp, plan[di].Name))
			}
			if f.PublicOnly && (imp == "internal" || strings.HasPrefix(imp, "internal/")) {
				out = append(out, fmt.Sprintf("%s (%s) imports %s: this floor uses public packages only", p.Path, f.Name, imp))
			}
		}
	}
	sort.Strings(out)
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
