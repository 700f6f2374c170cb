package main

// Real node on real time: runs the built strand binary as a real OS process,
// which dials (or serves) real TCP sockets.

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/testkit/testutil"
)

// runEnv runs the binary with extra environment variables.
func runEnv(t *testing.T, env []string, args ...string) (string, string, time.Duration, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	return out.String(), errb.String(), time.Since(start), err
}

// With every bootstrap server down, a command fails in seconds (it used
// to wait out a 30 s timeout), naming every address it tried; the list
// comes from STRAND_BOOTSTRAP when --bootstrap is not given.
func TestBootstrapDownFailsFastNamingAddresses(t *testing.T) {
	a1, a2 := testutil.FreeAddr(t), testutil.FreeAddr(t) // claimed, nothing listens
	_, errOut, took, err := runEnv(t, []string{"STRAND_BOOTSTRAP=" + a1 + "," + a2}, "topics", "list")
	if err == nil {
		t.Fatalf("topics list with no server up succeeded")
	}
	if !strings.Contains(errOut, a1) || !strings.Contains(errOut, a2) {
		t.Fatalf("the error does not name both addresses tried: %s", errOut)
	}
	if took > 15*time.Second {
		t.Fatalf("took %v to fail", took)
	}
	t.Logf("failed after %v: %s", took.Round(time.Millisecond), strings.TrimSpace(errOut))
}

// A dead first address in STRAND_BOOTSTRAP does not stop the command.
func TestBootstrapFromEnvSkipsDeadAddress(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	run(t, "", "topics", "create", "envtopic", "--bootstrap", n.Addr())
	dead := testutil.FreeAddr(t)
	out, errOut, took, err := runEnv(t, []string{"STRAND_BOOTSTRAP=" + dead + "," + n.Addr()}, "topics", "list")
	if err != nil || !strings.Contains(out, "envtopic") {
		t.Fatalf("topics list via STRAND_BOOTSTRAP=%s,%s: %v %q %s", dead, n.Addr(), err, out, errOut)
	}
	if took > 15*time.Second {
		t.Fatalf("took %v", took)
	}
	// --bootstrap wins over the environment.
	if _, _, _, err := runEnv(t, []string{"STRAND_BOOTSTRAP=" + dead}, "topics", "list", "--bootstrap", n.Addr()); err != nil {
		t.Fatalf("--bootstrap with a dead STRAND_BOOTSTRAP: %v", err)
	}
}

// The default list is the gRPC listeners of make run's three nodes.
func TestBootstrapDefaultIsMakeRunCluster(t *testing.T) {
	t.Setenv("STRAND_BOOTSTRAP", "")
	cmd := &cobra.Command{}
	cmd.Flags().String("bootstrap", "", "")
	got := strings.Join(bootstrapList(cmd), ",")
	if got != "127.0.0.1:9097,127.0.0.1:9107,127.0.0.1:9117" {
		t.Fatalf("default bootstrap %s", got)
	}
	t.Setenv("STRAND_BOOTSTRAP", "h1:1, h2:2")
	if got := strings.Join(bootstrapList(cmd), ","); got != "h1:1,h2:2" {
		t.Fatalf("STRAND_BOOTSTRAP gave %s", got)
	}
}
