package request_test

import (
	"go/build"
	"strings"
	"testing"
)

// forbiddenImport says why package request may not import path ("" when
// it may): it is the layer every front door calls, so it knows no
// transport, and it sits below api.
func forbiddenImport(path string) string {
	switch {
	case path == "google.golang.org/grpc" || strings.HasPrefix(path, "google.golang.org/grpc/"):
		return "a gRPC package: request is transport-free (api maps its answers to gRPC)"
	case path == "github.com/strand-io/strand/api" || strings.HasPrefix(path, "github.com/strand-io/strand/api/"):
		return "the gRPC front door, which calls request, not the other way"
	}
	return ""
}

// TestNoGRPC: package request (its non-test files) imports no gRPC
// package and not api, so a Kafka wire-protocol listener can call it
// without gRPC in between.
func TestNoGRPC(t *testing.T) {
	pkg, err := build.Default.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.Imports) == 0 {
		t.Fatal("no imports read: the check would pass vacuously")
	}
	for _, imp := range pkg.Imports {
		if why := forbiddenImport(imp); why != "" {
			t.Errorf("package request imports %s, %s", imp, why)
		}
	}
}

// TestForbiddenImport: the check recognises what it must refuse.
func TestForbiddenImport(t *testing.T) {
	for _, p := range []string{"google.golang.org/grpc", "google.golang.org/grpc/status", "google.golang.org/grpc/codes", "github.com/strand-io/strand/api"} {
		if forbiddenImport(p) == "" {
			t.Errorf("%s passes the check", p)
		}
	}
	for _, p := range []string{"google.golang.org/grpcx", "github.com/strand-io/strand/errs", "github.com/strand-io/strand/proto/strand/v1", "github.com/strand-io/strand/apiary"} {
		if forbiddenImport(p) != "" {
			t.Errorf("%s is refused", p)
		}
	}
}
