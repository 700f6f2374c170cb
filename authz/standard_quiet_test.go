package authz

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/metadata"
)

// TestStandardQuietDenial: a denial asked Quietly (a filtered listing, a
// first check with a fallback) is logged at debug, not as an info audit
// line; the same denial asked plainly is.
func TestStandardQuietDenial(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	im := &metadata.Image{}
	s := NewStandard(StandardConfig{Logger: lg}, func() *metadata.Image { return im })
	sess := auth.Session{Principal: auth.User("bob"), Host: "10.0.0.9"}
	a := Action{Op: OpDescribe, Type: ResourceTopic, Name: "orders", Request: "Metadata"}
	if s.Authorize(Quietly(context.Background()), sess, a) {
		t.Fatal("allowed with no ACL")
	}
	if buf.Len() != 0 {
		t.Fatalf("a quiet denial was audited at info: %s", buf.String())
	}
	if s.Authorize(context.Background(), sess, a) {
		t.Fatal("allowed with no ACL")
	}
	if !strings.Contains(buf.String(), "Principal = User:bob is Denied operation = Describe") {
		t.Fatalf("no audit line for a plain denial: %q", buf.String())
	}
}
