package kafka

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// kafkaKnows reports whether c is a code of Kafka's error table (franz-go's
// copy of it), or NONE.
func kafkaKnows(c int16) bool {
	return c == 0 || c == -1 || kerr.ErrorForCode(c) != kerr.UnknownServerError
}

// TestEveryCodeLeavesAsKafkas walks every error code the request layer has
// through the listener's mapping, for every version of every API served:
// whatever comes out is a code of Kafka's table. A code only Strand has
// must be mapped (strandOnly), or this fails.
func TestEveryCodeLeavesAsKafkas(t *testing.T) {
	var all []pb.ErrorCode
	for v := range pb.ErrorCode_name {
		all = append(all, pb.ErrorCode(v))
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for _, c := range all {
		if got := code(c); !kafkaKnows(got) {
			t.Errorf("code(%v) = %d: not a Kafka error code", c, got)
		}
		for key, a := range apis {
			for v := a.min; v <= a.max; v++ {
				if got := answerCode(kmsg.Key(key), v, c); !kafkaKnows(got) {
					t.Errorf("%s v%d answers %v as %d: not a Kafka error code", a.name, v, c, got)
				}
			}
		}
	}
	if len(strandOnly) == 0 {
		t.Fatal("no code only Strand has: TRANSACTION_TIMED_OUT is one")
	}
	for c := range strandOnly {
		if kafkaKnows(int16(c)) {
			t.Errorf("%v is mapped as Strand's own but Kafka knows code %d", c, int16(c))
		}
	}
}

// TestKafkasAnswerPerVersion: the codes Kafka answers for the
// transaction errors, by API and version.
func TestKafkasAnswerPerVersion(t *testing.T) {
	const (
		timedOut  = pb.ErrorCode_TRANSACTION_TIMED_OUT
		fenced    = pb.ErrorCode_PRODUCER_FENCED
		abortable = pb.ErrorCode_TRANSACTION_ABORTABLE
		PF        = pb.ErrorCode_PRODUCER_FENCED
		IPE       = pb.ErrorCode_INVALID_PRODUCER_EPOCH
		ITS       = pb.ErrorCode_INVALID_TXN_STATE
		TA        = pb.ErrorCode_TRANSACTION_ABORTABLE
	)
	for _, c := range []struct {
		key   kmsg.Key
		in    pb.ErrorCode
		wants map[int16]pb.ErrorCode // by version
	}{
		{kmsg.AddPartitionsToTxn, timedOut, map[int16]pb.ErrorCode{0: IPE, 1: IPE, 2: PF, 3: PF}},
		{kmsg.AddOffsetsToTxn, timedOut, map[int16]pb.ErrorCode{0: IPE, 1: IPE, 2: PF, 3: PF, 4: PF}},
		{kmsg.EndTxn, timedOut, map[int16]pb.ErrorCode{0: IPE, 1: IPE, 2: PF, 3: PF, 4: PF, 5: PF}},
		{kmsg.EndTxn, fenced, map[int16]pb.ErrorCode{1: IPE, 2: PF, 5: PF}},
		{kmsg.InitProducerID, fenced, map[int16]pb.ErrorCode{3: IPE, 4: PF, 5: PF}},
		{kmsg.Produce, timedOut, map[int16]pb.ErrorCode{3: IPE, 10: IPE, 11: IPE, 12: IPE}},
		{kmsg.Produce, abortable, map[int16]pb.ErrorCode{3: ITS, 10: ITS, 11: TA, 12: TA}},
		{kmsg.TxnOffsetCommit, fenced, map[int16]pb.ErrorCode{0: IPE, 3: IPE, 4: IPE, 5: IPE}},
		{kmsg.TxnOffsetCommit, timedOut, map[int16]pb.ErrorCode{0: IPE, 5: IPE}},
		{kmsg.TxnOffsetCommit, abortable, map[int16]pb.ErrorCode{0: ITS, 3: ITS, 4: TA, 5: TA}},
		{kmsg.DescribeTransactions, timedOut, map[int16]pb.ErrorCode{0: PF}},
		{kmsg.ListOffsets, pb.ErrorCode_OFFSET_NOT_AVAILABLE, map[int16]pb.ErrorCode{1: pb.ErrorCode_LEADER_NOT_AVAILABLE, 4: pb.ErrorCode_LEADER_NOT_AVAILABLE, 5: pb.ErrorCode_OFFSET_NOT_AVAILABLE, 7: pb.ErrorCode_OFFSET_NOT_AVAILABLE}},
	} {
		for v, want := range c.wants {
			if got := answerCode(c.key, v, c.in); got != int16(want) {
				t.Errorf("%s v%d answers %v as %v, want %v", c.key.Name(), v, c.in, pb.ErrorCode(got), want)
			}
		}
	}
}

// TestCodesConvertedOnlyByTheMapping reads the listener's source with its
// types: a request-layer code (pb.ErrorCode) becomes a number on the wire
// only in code and answerCode, so no answer can skip the mapping.
func TestCodesConvertedOnlyByTheMapping(t *testing.T) {
	exports := exportData(t)
	fset := token.NewFileSet()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, m, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, os.ErrNotExist
		}
		return os.Open(file)
	})
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check("github.com/strand-io/strand/api/kafka", fset, files, info); err != nil {
		t.Fatalf("type-checking the listener: %v", err)
	}
	isCode := func(tp types.Type) bool {
		n, ok := tp.(*types.Named)
		return ok && n.Obj().Name() == "ErrorCode" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "github.com/strand-io/strand/proto/strand/v1"
	}
	conversions := 0
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			ast.Inspect(d, func(n ast.Node) bool {
				call, ok2 := n.(*ast.CallExpr)
				if !ok2 || len(call.Args) != 1 {
					return true
				}
				tv, ok2 := info.Types[call.Fun]
				if !ok2 || !tv.IsType() {
					return true
				}
				b, ok2 := tv.Type.Underlying().(*types.Basic)
				if !ok2 || b.Info()&types.IsInteger == 0 || isCode(tv.Type) {
					return true
				}
				if !isCode(info.Types[call.Args[0]].Type) {
					return true
				}
				conversions++
				if !ok || (fd.Name.Name != "code" && fd.Name.Name != "answerCode") {
					t.Errorf("%s: a request-layer code converted to %s outside code and answerCode", fset.Position(call.Pos()), tv.Type)
				}
				return true
			})
		}
	}
	if conversions == 0 {
		t.Fatal("found no conversion of a code at all: the check does not see what it should")
	}
}

// exportData maps the import path of every dependency of this package to
// its compiled export data (go list -export).
func exportData(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, file, ok := strings.Cut(sc.Text(), " ")
		if ok && file != "" {
			m[path] = file
		}
	}
	return m
}
