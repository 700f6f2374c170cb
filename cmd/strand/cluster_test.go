package main

// Real node on real time: runs the built strand binary as a real OS process,
// which dials (or serves) real TCP sockets.

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// runFail runs the binary expecting it to fail; it returns stderr.
func runFail(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err == nil {
		t.Fatalf("strand %s succeeded:\n%s", strings.Join(args, " "), out.String())
	}
	return errb.String()
}

// TestClusterMembersCommands: `strand cluster describe --status` and
// `--replication` in kafka-metadata-quorum's shapes, add-voter and
// remove-voter with a second, controller-only node, and unregister-broker.
func TestClusterMembersCommands(t *testing.T) {
	var cfg1 node.Config
	n := testutil.StartDev(t, t.TempDir(), func(c *node.Config) { cfg1 = *c })
	b := "--bootstrap=" + n.Addr()

	out := run(t, "", "cluster", "describe", "--status", b)
	for _, re := range []string{
		`(?m)^ClusterId: +\S+$`, `(?m)^LeaderId: +1$`, `(?m)^LeaderEpoch: +[1-9]\d*$`, `(?m)^HighWatermark: +[1-9]\d*$`,
		`(?m)^MaxFollowerLag: +0$`, `(?m)^MaxFollowerLagTimeMs: +0$`,
		`(?m)^CurrentVoters: +\[\{"id": 1, "directoryId": "AAAAAAAAAAAAAAAAAAAAAA", "endpoints": \["CONTROLLER://` + regexp.QuoteMeta(cfg1.ControllerListen) + `"\]\}\]$`,
		`(?m)^CurrentObservers: +\[\]$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("describe --status does not match %s:\n%s", re, out)
		}
	}
	out = run(t, "", "cluster", "describe", "--replication", b)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status" {
		t.Fatalf("describe --replication header: %q", lines[0])
	}
	if len(lines) != 2 || !regexp.MustCompile(`^1 +AAAAAAAAAAAAAAAAAAAAAA +[1-9]\d* +0 +\d{13} +\d{13} +Leader$`).MatchString(lines[1]) {
		t.Fatalf("describe --replication rows:\n%s", out)
	}

	// A controller-only node 2 started with voters that do not name it
	// waits; add-voter makes it a voter.
	cfg2 := testutil.DevConfig(t, t.TempDir())
	cfg2.NodeID, cfg2.Broker, cfg2.Controller, cfg2.Voters = 2, false, true, cfg1.Voters
	n2, err := node.Start(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n2.Stop() })
	mustContain(t, run(t, "", "cluster", "add-voter", "--node-id", "2", "--address", cfg2.ControllerListen, b),
		"Added controller 2 with directory id AAAAAAAAAAAAAAAAAAAAAA and endpoints: CONTROLLER://"+cfg2.ControllerListen)
	mustContain(t, runFail(t, "cluster", "add-voter", "--node-id", "2", "--address", cfg2.ControllerListen, b), "DUPLICATE_VOTER")
	wait.Eventually(t, 10*time.Second, "two voters in describe --status", func() bool {
		out = run(t, "", "cluster", "describe", "--status", "--replication", b)
		return regexp.MustCompile(`(?m)^CurrentVoters: +\[\{"id": 1, .*\}, \{"id": 2, .*\}\]$`).MatchString(out) &&
			regexp.MustCompile(`(?m)^2 +AAAAAAAAAAAAAAAAAAAAAA +-?\d+ +-?\d+ +-?\d+ +-?\d+ +Follower$`).MatchString(out)
	})
	mustContain(t, run(t, "", "cluster", "remove-voter", "--node-id", "2", b), "Removed KRaft controller 2 with directory id AAAAAAAAAAAAAAAAAAAAAA")
	mustContain(t, runFail(t, "cluster", "remove-voter", "--node-id", "2", b), "VOTER_NOT_FOUND")
	mustContain(t, runFail(t, "cluster", "remove-voter", "--node-id", "1", b), "INVALID_REQUEST")
	out = run(t, "", "cluster", "describe", "--status", b)
	if !regexp.MustCompile(`(?m)^CurrentVoters: +\[\{"id": 1, [^}]*\}\]$`).MatchString(out) {
		t.Fatalf("after remove-voter:\n%s", out)
	}

	mustContain(t, runFail(t, "cluster", "unregister-broker", "--id", "9", b), "BROKER_ID_NOT_REGISTERED")
	mustContain(t, run(t, "", "cluster", "unregister-broker", "--id", "1", b), "Broker 1 is no longer registered.")
}
