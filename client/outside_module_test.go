package client_test

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// outsideProgram is an application in a module of its own: it may import
// only the SDK's public packages, so it compiles only if every type the
// SDK's exported API names is reachable from outside the module (a type of
// an internal/ package in an exported signature cannot be named there).
const outsideProgram = `package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/record"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

func main() {
	var codec record.Compression = record.Zstd
	var c client.CompressionCodec = codec
	var clk clock.Clock = clock.Real
	opts := []client.Opt{
		client.Bootstrap("127.0.0.1:1"),
		client.TransactionalID("outside-1"),
		client.Compression(c),
		client.Linger(5 * time.Millisecond),
		client.TransactionTimeout(30 * time.Second),
		client.WithClock(clk),
	}
	p, err := client.NewProducer(opts...)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	defer p.Close(ctx)
	var begin func() error = p.BeginTransaction
	var commit func(context.Context) error = p.CommitTransaction
	_, _ = begin, commit
	var e *client.Error = &errs.Error{Code: pb.ErrorCode_NOT_COORDINATOR}
	fmt.Println("codec", c, "error", e)

	for _, err := range []error{
		nil,
		errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "leader moved"),
		fmt.Errorf("%w: %w", errs.ErrAbortable, errs.TransactionTimedOut),
		errs.ProducerFenced,
		errs.New(pb.ErrorCode_INVALID_TXN_STATE, "bug"),
		fmt.Errorf("%w: %w", errs.ErrCommitOutcomeUnknown, context.DeadlineExceeded),
		fmt.Errorf("%w: %w", client.ErrCommitOutcomeUnknown, errs.RequestTimedOut),
		context.DeadlineExceeded,
		errors.New("plain"),
	} {
		var cat errs.Category = errs.CategoryOf(err)
		if client.Classify(err) != cat {
			panic("client.Classify and errs.CategoryOf disagree")
		}
		fmt.Printf("%v -> code %v, class %v\n", err, errs.CodeOf(err), cat)
	}
}
`

// An application outside the module builds against the SDK's public
// packages only: client, record, errs, clock and the generated protocol.
func TestOutsideModuleBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a separate module")
	}
	_, file, _, _ := runtime.Caller(0)
	root, err := filepath.Abs(filepath.Join(filepath.Dir(file), ".."))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goMod := "module example.com/outside\n\ngo 1.26\n\nrequire github.com/strand-io/strand v0.0.0\n\nreplace github.com/strand-io/strand => " + root + "\n"
	for name, data := range map[string][]byte{"go.mod": []byte(goMod), "go.sum": sum, "main.go": []byte(outsideProgram)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	run := func(args ...string) string {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %s in a module outside strand: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	run("build", "-o", filepath.Join(dir, "outside"), ".")
	out := run("run", ".")
	for _, want := range []string{
		"codec zstd",
		"<nil> -> code NONE, class none",
		"leader moved -> code NOT_LEADER_OR_FOLLOWER, class retriable",
		"-> code TRANSACTION_TIMED_OUT, class abortable",
		"PRODUCER_FENCED -> code PRODUCER_FENCED, class application-recoverable",
		"bug -> code INVALID_TXN_STATE, class fatal",
		"context deadline exceeded -> code UNKNOWN_SERVER_ERROR, class commit-outcome-unknown",
		"REQUEST_TIMED_OUT -> code REQUEST_TIMED_OUT, class commit-outcome-unknown",
		"plain -> code UNKNOWN_SERVER_ERROR, class fatal",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the outside program's output lacks %q:\n%s", want, out)
		}
	}
}

// No exported identifier of package client names a type of an internal
// package: an application could not write that type down. The check reads
// the package's documentation (what go doc shows an application) for the
// names client's files give their internal imports.
func TestExportedAPINamesNoInternalType(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go doc")
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	fset := token.NewFileSet()
	names := map[string]string{}
	srcs, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, src := range srcs {
		if strings.HasSuffix(src, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, src, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(path, "/internal/") {
				continue
			}
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names[name] = path
		}
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "doc", "-all", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	doc, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go doc: %v\n%s", err, doc)
	}
	for name, path := range names {
		re := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\.[A-Z]\w*`)
		for _, line := range strings.Split(string(doc), "\n") {
			if m := re.FindString(line); m != "" {
				t.Errorf("the exported API names %s (package %s, internal): %s", m, path, strings.TrimSpace(line))
			}
		}
	}
}
