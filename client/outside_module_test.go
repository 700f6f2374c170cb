package client_test

// Real node on real time: builds and runs a program from another module as a real
// OS process, which dials the node over real TCP.

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

	"github.com/strand-io/strand/testkit/testutil"
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
	"os"
	"strings"
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
	bootstrap := "127.0.0.1:1"
	if len(os.Args) > 1 {
		bootstrap = os.Args[1]
	}
	opts := []client.Opt{
		client.Bootstrap(bootstrap),
		client.TransactionalID("outside-1"),
		client.Compression(c),
		client.Linger(5 * time.Millisecond),
		client.TransactionTimeout(30 * time.Second),
		client.WithClock(clk),
	}
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
			fail("client.Classify and errs.CategoryOf disagree")
		}
		fmt.Printf("%v -> code %v, class %v\n", err, errs.CodeOf(err), cat)
	}
	if len(os.Args) > 1 {
		transact(bootstrap, opts)
	}
}

func fail(format string, args ...any) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	os.Exit(1)
}

// transact runs against a live node: a committed and an aborted
// transaction in zstd batches, a read_committed read-back, and a zombie
// fenced by a second producer with the same transactional id, whose error
// is classified from the public packages alone.
func transact(bootstrap string, opts []client.Opt) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm, err := client.NewAdmin(client.Bootstrap(bootstrap))
	if err != nil {
		fail("admin: %v", err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "outside", Partitions: 1, ReplicationFactor: 1}); err != nil {
		fail("create topic: %v", err)
	}
	p, err := client.NewProducer(opts...)
	if err != nil {
		fail("producer: %v", err)
	}
	defer p.Close(ctx)
	if err := p.InitTransactions(ctx); err != nil {
		fail("init: %v (%v)", err, errs.CategoryOf(err))
	}
	for _, commit := range []bool{true, false} {
		if err := p.BeginTransaction(); err != nil {
			fail("begin: %v", err)
		}
		for _, v := range []string{"a", "b"} {
			if commit {
				v = "committed-" + v
			} else {
				v = "aborted-" + v
			}
			p.Produce(ctx, &client.Record{Topic: "outside", Value: []byte(v)}, nil)
		}
		end := p.AbortTransaction
		if commit {
			end = p.CommitTransaction
		}
		if err := end(ctx); err != nil {
			fail("end (commit %v): %v (%v)", commit, err, errs.CategoryOf(err))
		}
	}
	cons, err := client.NewConsumer(client.Bootstrap(bootstrap), client.Isolation(client.ReadCommitted))
	if err != nil {
		fail("consumer: %v", err)
	}
	defer cons.Close(ctx)
	cons.Assign(map[client.TopicPartition]int64{{Topic: "outside", Partition: 0}: client.OffsetEarliest})
	var got []string
	for len(got) < 2 {
		recs, err := cons.Poll(ctx)
		if err != nil {
			fail("poll: %v", err)
		}
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
	}
	fmt.Println("read_committed:", strings.Join(got, " "))

	zombie := p
	fresh, err := client.NewProducer(opts...)
	if err != nil {
		fail("second producer: %v", err)
	}
	defer fresh.Close(ctx)
	if err := fresh.InitTransactions(ctx); err != nil {
		fail("second init: %v", err)
	}
	if err := zombie.BeginTransaction(); err != nil {
		fmt.Printf("zombie: %v -> code %v, class %v\n", err, errs.CodeOf(err), errs.CategoryOf(err))
		return
	}
	zombie.Produce(ctx, &client.Record{Topic: "outside", Value: []byte("zombie")}, nil)
	// As in Kafka (KIP-588), a stale epoch on produce is abortable (the
	// epoch may have been bumped by a timeout); the abort then learns
	// whether this producer was fenced.
	err = zombie.CommitTransaction(ctx)
	fmt.Printf("zombie commit: code %v, class %v\n", errs.CodeOf(err), errs.CategoryOf(err))
	if errs.CategoryOf(err) == errs.Abortable {
		err = zombie.AbortTransaction(ctx)
		fmt.Printf("zombie abort: code %v, class %v, fenced %v\n", errs.CodeOf(err), errs.CategoryOf(err), errors.Is(err, errs.ProducerFenced))
	}
}
`

// An application outside the module builds against the SDK's public
// packages only (client, record, errs, clock and the generated protocol),
// and with them alone produces transactionally with a chosen codec against
// a node, reads back read_committed, and classifies every error it meets.
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
	n := testutil.StartDev(t, t.TempDir())
	cmd := exec.Command(filepath.Join(dir, "outside"), n.Addr())
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	if err != nil {
		t.Fatalf("the outside program against a node: %v\n%s", err, out)
	}
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
		"read_committed: committed-a committed-b",
		"zombie commit: code INVALID_PRODUCER_EPOCH, class abortable",
		"zombie abort: code PRODUCER_FENCED, class application-recoverable, fenced true",
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
