package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/fakebroker"
	"github.com/strand-io/strand/testkit/wait"
)

// syncBuffer is a bytes.Buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestConsumeReportsRetriedFetchErrors: a partition answering
// KAFKA_STORAGE_ERROR (which the consumer retries by itself) is reported
// on stderr, once however many fetches fail, and again when it is read;
// the record then comes out on stdout as ever.
func TestConsumeReportsRetriedFetchErrors(t *testing.T) {
	b := fakebroker.Start(t, fakebroker.Topic{Name: "t"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := client.NewProducer(client.Bootstrap(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &client.Record{Topic: "t", Value: []byte("the record")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	b.Refuse("Fetch", pb.ErrorCode_KAFKA_STORAGE_ERROR)
	refusals := b.Refusals()

	cmd := exec.CommandContext(ctx, binary, "consume", "t", "--from-beginning", "--max-records", "1", "--timeout", "30s", "--bootstrap="+b.Addr())
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const failing = "strand: fetching t-0: KAFKA_STORAGE_ERROR"
	wait.Eventually(t, 20*time.Second, "the storage error on stderr, over several failed fetches", func() bool {
		return strings.Contains(stderr.String(), failing) && b.Refusals()-refusals >= 5
	})
	b.Refuse("Fetch", pb.ErrorCode_NONE)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("consume: %v\nstderr: %s", err, stderr.String())
	}
	if got := stdout.String(); got != "the record\n" {
		t.Errorf("stdout %q, want the record", got)
	}
	errOut := stderr.String()
	if n := strings.Count(errOut, failing); n != 1 {
		t.Errorf("the storage error written %d times over %d failed fetches, want once:\n%s", n, b.Refusals()-refusals, errOut)
	}
	if !strings.Contains(errOut, "strand: t-0 is read again") {
		t.Errorf("stderr does not say t-0 is read again:\n%s", errOut)
	}
}
