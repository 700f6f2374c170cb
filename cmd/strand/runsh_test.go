package main

// Real processes on real time: scripts/run.sh starts and stops real OS processes,
// checked through their pids and signals.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// runScript runs scripts/run.sh with the test's binary, data directory and
// ports.
func runScript(t *testing.T, data string, base int, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join("..", "..", "scripts", "run.sh"), args...)
	cmd.Env = append(os.Environ(), "BIN="+binary, "DATA="+data, "PORT_BASE="+strconv.Itoa(base))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func pidOf(t *testing.T, data string, n int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, fmt.Sprintf("node%d.pid", n)))
	if err != nil {
		t.Fatalf("node %d: %v", n, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("node%d.pid: %v", n, err)
	}
	return pid
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// cmdlineOf is the process's NUL-separated command line.
func cmdlineOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return string(b)
}

// scripts/run.sh start-node N starts one killed node again from its
// recorded command line (start restarted every node), stop-node N stops
// one, and the pid files always name the running processes.
func TestRunScriptStartAndStopOneNode(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid is missing")
	}
	data := t.TempDir()
	base := testutil.FreePortBlock(t, 26) // three nodes at base (Kafka), +10, +20, each with +1..+5 (+5: gRPC)
	t.Cleanup(func() { runScript(t, data, base, "stop") })
	if out, err := runScript(t, data, base, "start"); err != nil {
		t.Fatalf("run.sh start: %v\n%s", err, out)
	}
	pid1, pid2, pid3 := pidOf(t, data, 1), pidOf(t, data, 2), pidOf(t, data, 3)

	// kill -9 node 2, as the README's failure walk-through does.
	if err := syscall.Kill(pid2, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if wait.Until(20*time.Second, "node 2 to die", func() bool { return !alive(pid2) || strings.Contains(readStat(pid2), " Z ") }) != nil {
		t.Fatalf("node 2 (pid %d) still runs after SIGKILL", pid2)
	}
	out, err := runScript(t, data, base, "start-node", "2")
	if err != nil {
		t.Fatalf("run.sh start-node 2: %v\n%s", err, out)
	}
	if p1, p3 := pidOf(t, data, 1), pidOf(t, data, 3); p1 != pid1 || p3 != pid3 || !alive(p1) || !alive(p3) {
		t.Fatalf("start-node 2 touched the other nodes: pids %d %d, were %d %d\n%s", p1, p3, pid1, pid3, out)
	}
	newPid2 := pidOf(t, data, 2)
	want, _ := os.ReadFile(filepath.Join(data, "node2.cmd"))
	if newPid2 == pid2 || !alive(newPid2) || cmdlineOf(newPid2) != string(want) {
		t.Fatalf("node2.pid says %d (alive %v), command line %q, want node2.cmd %q", newPid2, alive(newPid2), cmdlineOf(newPid2), want)
	}
	// The node serves again: the script waited for its health.
	run(t, "", "health", "--addr", fmt.Sprintf("127.0.0.1:%d", base+15))
	out, err = runScript(t, data, base, "status")
	if err != nil || !strings.Contains(out, fmt.Sprintf("node 2: running (pid %d)", newPid2)) || !strings.Contains(out, fmt.Sprintf("node 1: running (pid %d)", pid1)) {
		t.Fatalf("status: %v\n%s", err, out)
	}

	if out, err := runScript(t, data, base, "start-node", "2"); err == nil || !strings.Contains(out, "already runs") {
		t.Fatalf("start-node of a running node: %v\n%s", err, out)
	}
	if out, err := runScript(t, data, base, "start-node", "7"); err == nil || !strings.Contains(out, "no node 7") {
		t.Fatalf("start-node 7: %v\n%s", err, out)
	}

	out, err = runScript(t, data, base, "stop-node", "2")
	if err != nil || !strings.Contains(out, "stopped node 2") {
		t.Fatalf("run.sh stop-node 2: %v\n%s", err, out)
	}
	if alive(newPid2) && !strings.Contains(readStat(newPid2), " Z ") {
		t.Fatalf("node 2 (pid %d) still runs after stop-node", newPid2)
	}
	if _, err := os.Stat(filepath.Join(data, "node2.pid")); !os.IsNotExist(err) {
		t.Fatalf("node2.pid left behind after stop-node: %v", err)
	}
	if !alive(pid1) || !alive(pid3) {
		t.Fatal("stop-node 2 stopped other nodes")
	}
	if out, err := runScript(t, data, base, "status"); err != nil || !strings.Contains(out, "node 2: stopped") {
		t.Fatalf("status after stop-node 2: %v\n%s", err, out)
	}
}

// readStat is /proc/PID/stat (its third field is the state; Z: a zombie,
// whose parent, setsid's caller, has not reaped it).
func readStat(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return string(b)
}
