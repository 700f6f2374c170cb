package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"

	"google.golang.org/grpc"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// TestEveryClientRPCIsServed: every method of the client-facing services
// has a wrapper in services.go (or producer.go), so a request the request
// layer answers never gets UNIMPLEMENTED from gRPC because a wrapper was
// forgotten. The two the client listener refuses on purpose are listed.
func TestEveryClientRPCIsServed(t *testing.T) {
	refused := map[string]bool{"Transactions/WriteTxnMarkers": true, "Transactions/AddPartitionsToTxn": true}
	defined := map[string]map[string]bool{}
	fset := token.NewFileSet()
	for _, file := range []string{"services.go", "producer.go"} {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			typ := fn.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				if defined[id.Name] == nil {
					defined[id.Name] = map[string]bool{}
				}
				defined[id.Name][fn.Name.Name] = true
			}
		}
	}
	for _, s := range []struct {
		desc grpc.ServiceDesc
		impl string
	}{
		{pb.Metadata_ServiceDesc, "metadataService"}, {pb.Admin_ServiceDesc, "adminService"},
		{pb.Consumer_ServiceDesc, "consumerService"}, {pb.Transactions_ServiceDesc, "transactionsService"},
		{pb.Groups_ServiceDesc, "groupsService"}, {pb.Producer_ServiceDesc, "producerService"},
	} {
		names := []string{}
		for _, m := range s.desc.Methods {
			names = append(names, m.MethodName)
		}
		for _, m := range s.desc.Streams {
			names = append(names, m.StreamName)
		}
		for _, n := range names {
			short := s.desc.ServiceName[len("strand.v1."):] + "/" + n
			if !defined[s.impl][n] && !refused[short] {
				t.Errorf("%s has no wrapper in %s: gRPC clients get UNIMPLEMENTED", short, s.impl)
			}
		}
	}
}
