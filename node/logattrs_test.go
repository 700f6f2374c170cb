package node_test

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// duplicateKeys returns the top-level keys a JSON log line holds more
// than once (slog writes every attribute it is given, repeats included).
func duplicateKeys(line string) ([]string, error) {
	dec := json.NewDecoder(strings.NewReader(line))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	seen := map[string]bool{}
	var dups []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k := tok.(string)
		if seen[k] {
			dups = append(dups, k)
		}
		seen[k] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return dups, nil
}

// TestLogLinesNameTheNodeOnce: every component logs through the node's
// logger, which already carries node=<id>; the replication manager added
// it again (node=1 node=1 on every leadership change) and the controller
// added controller=<its own id>.
func TestLogLinesNameTheNodeOnce(t *testing.T) {
	var out testutil.LogBuffer
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) {
		cfg.Logger = slog.New(slog.NewJSONHandler(io.MultiWriter(&out), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, _ := client.NewAdmin(client.Bootstrap(n.Addr()))
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "logs", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if wait.Until(20*time.Second, "a became-leader line", func() bool { return strings.Contains(out.String(), `"msg":"became leader"`) }) != nil {
		t.Fatalf("no \"became leader\" line:\n%s", out.String())
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		dups, err := duplicateKeys(line)
		if err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if len(dups) > 0 {
			t.Errorf("keys %v repeated in %s", dups, line)
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(line), &m)
		if m["node"] != nil && m["controller"] == m["node"] {
			t.Errorf("the controller names its own node again: %s", line)
		}
		checked++
	}
	if checked < 5 {
		t.Fatalf("only %d log lines", checked)
	}
}
