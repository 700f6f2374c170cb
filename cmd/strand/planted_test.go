package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/internal/planted"
)

// TestReleaseBinaryRefusesPlantedBugs: the binary built without the tag
// "planted" (as make build, make image and go build ./cmd/strand build it)
// cannot switch a fixed bug back on: it never reads STRAND_PLANTED_BUGS,
// and `strand server` with the variable set exits non-zero at once,
// saying the binary carries no planted bugs and how to build one that
// does, so a drill cannot silently rehearse nothing. The binary built with
// -tags planted does read the variable (a misspelt switch stops it at
// start).
func TestReleaseBinaryRefusesPlantedBugs(t *testing.T) {
	run := func(bin, env string, args ...string) (string, error) {
		t.Helper()
		// A server that starts (the bug) is stopped after 20 s, failing.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), planted.EnvVar+"="+env)
		cmd.Dir = t.TempDir()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	dir := t.TempDir()
	for _, env := range []string{planted.MarkerRetryUnreplicated.String(), "no-such-bug"} {
		out, err := run(binary, env, "server", "--dev", "--data-dir", dir)
		if err == nil {
			t.Fatalf("the release binary's strand server started with %s=%s:\n%s", planted.EnvVar, env, out)
		}
		for _, want := range []string{planted.EnvVar, "carries no planted bugs", "-tags planted"} {
			if !strings.Contains(out, want) {
				t.Fatalf("%s=%s: the refusal does not say %q:\n%s", planted.EnvVar, env, want, out)
			}
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the refused server wrote its data directory: %v", ents)
	}

	tagged := filepath.Join(t.TempDir(), "strand-planted")
	if out, err := exec.Command("go", "build", "-tags", planted.BuildTag, "-o", tagged, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", planted.BuildTag, err, out)
	}
	out, err := run(tagged, "no-such-bug", "server", "--dev", "--data-dir", dir)
	if err == nil || !strings.Contains(out, `unknown planted bug "no-such-bug"`) {
		t.Fatalf("the binary built with -tags %s did not read %s: %v\n%s", planted.BuildTag, planted.EnvVar, err, out)
	}
}
