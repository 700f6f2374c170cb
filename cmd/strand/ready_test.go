package main

// Real node on real time: starts `strand server` as a real OS process and races the
// CLI against its start over real TCP.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/internal/planted"
	"github.com/strand-io/strand/node"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

// cliCreateWhileStarting runs `strand topics create` against a dev node
// whose registration is held: the CLI must keep retrying while the node
// refuses it as starting (and `strand health` must fail), then succeed
// once the registration goes through.
func cliCreateWhileStarting(t *testing.T) error {
	cfg := testutil.DevConfig(t, t.TempDir())
	hold := testutil.NewRegistrationHold(true)
	cfg.UnaryInterceptors = []grpc.UnaryServerInterceptor{hold.Intercept}
	n, err := node.Start(cfg)
	if err != nil {
		return err
	}
	t.Cleanup(func() { n.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "topics", "create", "t1", "--partitions", "2", "--bootstrap", n.Addr())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if wait.Until(20*time.Second, "the CLI's CreateTopics to reach the node twice", func() bool {
		return len(exited) > 0 || hold.Seen(pb.Admin_CreateTopics_FullMethodName) >= 2
	}) != nil {
		return fmt.Errorf("the CLI's CreateTopics did not reach the node twice while its registration was held")
	}
	select {
	case err := <-exited:
		return fmt.Errorf("strand topics create ended while the node could not be ready (%v): %s", err, out.String())
	default:
	}
	health := exec.CommandContext(ctx, binary, "health", "--addr", n.Addr())
	if hout, err := health.CombinedOutput(); err == nil || !strings.Contains(string(hout), "NOT_SERVING") {
		return fmt.Errorf("strand health on a starting node: %v %s", err, hout)
	}
	hold.Release()
	if err := <-exited; err != nil || !strings.Contains(out.String(), "Created topic t1.") {
		return fmt.Errorf("strand topics create after the node became ready: %v: %s", err, out.String())
	}
	if hout, err := exec.CommandContext(ctx, binary, "health", "--addr", n.Addr(), "--wait", "20s").CombinedOutput(); err != nil {
		return fmt.Errorf("strand health on a ready node: %v %s", err, hout)
	}
	return nil
}

// TestTopicsCreateWhileNodeStarts: `strand topics create` sent while the
// node starts waits for it instead of failing.
func TestTopicsCreateWhileNodeStarts(t *testing.T) {
	if err := cliCreateWhileStarting(t); err != nil {
		t.Fatal(err)
	}
}

// TestTopicsCreateWhileNodeStartsCatchesServeBeforeReady: with the fix
// undone, the same scenario fails.
func TestTopicsCreateWhileNodeStartsCatchesServeBeforeReady(t *testing.T) {
	defer planted.Set(planted.ServeBeforeReady)()
	err := cliCreateWhileStarting(t)
	if err == nil {
		t.Fatal("with serve-before-ready planted, strand topics create on a starting node did not fail")
	}
	t.Logf("with serve-before-ready planted: %v", err)
}

// TestServerStartThenTopicsCreate is the issue's script: start `strand
// server --dev` and run `strand topics create` at once (the CLI retries
// until the port answers); it must succeed every time.
func TestServerStartThenTopicsCreate(t *testing.T) {
	for i := range 3 {
		dir := t.TempDir()
		listen := testutil.FreeAddr(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		srv := exec.Command(binary, "server", "--dev", "--data-dir", dir, "--listen", listen, "--kafka-listen", "",
			"--controller-listen", testutil.FreeAddr(t), "--inter-broker-listen", testutil.FreeAddr(t), "--metrics-listen", "off", "--log-level", "warn")
		var srvOut bytes.Buffer
		srv.Stdout, srv.Stderr = &srvOut, &srvOut
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, binary, "topics", "create", "t1", "--bootstrap", listen).CombinedOutput()
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
		cancel()
		if err != nil || !strings.Contains(string(out), "Created topic t1.") {
			t.Fatalf("start %d: strand topics create right after strand server: %v: %s\nserver log:\n%s", i, err, out, srvOut.String())
		}
	}
}
