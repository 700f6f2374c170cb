// Package judges holds tests that Strand did not write the other side of:
// Kafka clients from elsewhere (kcat, kafka-python, librdkafka through
// confluent-kafka-python, sarama) run against the Kafka listeners of an
// in-process three-node cluster, and the tests assert what those programs
// print. A client written here could share a misreading of the protocol
// with the listener; a client written by others cannot.
//
// The external programs come from Debian's packages (.ci/run installs
// them). A test whose program is missing skips, or fails when the
// environment sets STRAND_JUDGES=require, as CI does, so a judge cannot go
// quiet there by not being installed.
package judges

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Python is the interpreter that sees Debian's python3-kafka and
// python3-confluent-kafka: another python3 earlier on PATH (pyenv, a
// virtualenv) does not.
const Python = "/usr/bin/python3"

// Required reports whether missing judges fail rather than skip
// (STRAND_JUDGES=require).
func Required() bool { return os.Getenv("STRAND_JUDGES") == "require" }

// Missing skips t, or fails it when judges are required, saying what is
// missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	missing(t, format, args...)
}

// missing skips t, or fails it when judges are required.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("STRAND_JUDGES=require: "+format, args...)
	}
	t.Skipf(format+" (set STRAND_JUDGES=require to fail instead)", args...)
}

// Program returns the path of an external program, or skips (fails) t
// when it is not installed.
func Program(t testing.TB, name, debianPackage string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		missing(t, "%s not installed (Debian package %s): %v", name, debianPackage, err)
	}
	return path
}

// PythonModule checks that Python imports module, or skips (fails) t.
func PythonModule(t testing.TB, module, debianPackage string) {
	t.Helper()
	if _, err := os.Stat(Python); err != nil {
		missing(t, "%s not found: %v", Python, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, Python, "-c", "import "+module).CombinedOutput()
	if err != nil {
		missing(t, "%s cannot import %s (Debian package %s): %v: %s", Python, module, debianPackage, err, bytes.TrimSpace(out))
	}
}

// Run runs a program with stdin as its input and returns what it wrote to
// stdout. It fails t, showing stderr, when the program fails or outlives
// timeout.
func Run(t testing.TB, timeout time.Duration, stdin string, name string, args ...string) string {
	t.Helper()
	out, errOut, err := RunErr(timeout, stdin, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, out, errOut)
	}
	if errOut != "" {
		t.Logf("%s %s: stderr:\n%s", name, strings.Join(args, " "), errOut)
	}
	return out
}

// RunErr runs a program like Run and returns its stdout, its stderr and
// how it ended, for a test that expects a failure.
func RunErr(timeout time.Duration, stdin string, name string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	// A killed program's children (none expected) must not hold the pipes.
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return o.String(), e.String(), err
}
