package client_test

// Real node on real time: the example is a program's main, which dials a real
// address as a user's program would.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
)

// bootstrap is the address of the Strand server the examples run against:
// the one-node server TestMain starts, as `strand server --dev` would be
// on a developer's machine.
var bootstrap string

// exampleTopics are the topics the examples use (name: partitions),
// created before they run, as an operator would have.
var exampleTopics = map[string]int32{"orders": 3, "payments": 1, "ledger": 1, "clicks": 1, "numbers": 1, "doubled": 1}

// TestMain starts a server for the examples when they are going to run
// (no -run, or a -run pattern that names an example), and stops it after.
func TestMain(m *testing.M) {
	flag.Parse()
	stop := func() {}
	if examplesSelected() {
		var err error
		if bootstrap, stop, err = startExampleServer(); err != nil {
			fmt.Fprintln(os.Stderr, "the examples' server did not start:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

// examplesSelected reports whether -run may select an example: it is
// empty, names one (contains "Example"), or matches the word.
func examplesSelected() bool {
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	pat := strings.Split(f.Value.String(), "/")[0]
	if strings.Contains(pat, "Example") {
		return true
	}
	re, err := regexp.Compile(pat)
	return err == nil && re.MatchString("Example")
}

// startExampleServer starts a one-node server in a temporary directory
// and creates exampleTopics. The group coordinator does not wait for more
// members before a new group's first rebalance, so the examples' groups
// form at once.
func startExampleServer() (addr string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "strand-examples-")
	if err != nil {
		return "", nil, err
	}
	n, stopNode, err := testutil.StartDevNode(dir, func(c *node.Config) { c.GroupConfig.InitialRebalanceDelay = 0 })
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop = func() {
		stopNode()
		os.RemoveAll(dir)
	}
	adm, err := client.NewAdmin(client.Bootstrap(n.Addr()))
	if err != nil {
		stop()
		return "", nil, err
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, parts := range exampleTopics {
		if err := adm.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: parts, ReplicationFactor: 1}); err != nil {
			stop()
			return "", nil, fmt.Errorf("creating %s: %w", name, err)
		}
	}
	return n.Addr(), stop, nil
}
