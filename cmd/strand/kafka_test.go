package main

// Real node on real time: runs `strand server` as a real OS process and dials it
// with franz-go over real TCP, as the README's program does.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
)

// readmeFranzGo is README.md's franz-go program ("Kafka clients"), with
// the seed broker a parameter; TestReadmeFranzGoProgram checks the README
// shows these lines.
func readmeFranzGo(ctx context.Context, seed string) error {
	// README begin
	cl, _ := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ConsumeTopics("greetings"))
	defer cl.Close()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "greetings", Value: []byte("hello from franz-go")}).FirstErr()
	fetches := cl.PollFetches(ctx) // from the start of each partition
	fetches.EachRecord(func(r *kgo.Record) { fmt.Println(string(r.Value)) })
	// README end
	return err
}

// TestReadmeFranzGoProgram: `strand server` serves Kafka clients on
// --kafka-listen and hands them --kafka-advertise, and the README's five
// lines of franz-go write a record and read it back through it (what they
// print is what they read).
func TestReadmeFranzGoProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("kafka_test.go")
	if err != nil {
		t.Fatal(err)
	}
	// The program as the README shows it: this file's lines with the seed
	// broker make run's first Kafka listener.
	prog := regexp.MustCompile(`(?s)// README begin\n(.*?)\t// README end`).FindSubmatch(src)
	if prog == nil {
		t.Fatal("no README block in kafka_test.go")
	}
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(string(prog[1])), "\n") {
		want = append(want, strings.TrimSpace(strings.ReplaceAll(l, "SeedBrokers(seed)", `SeedBrokers("127.0.0.1:9092")`)))
	}
	if !strings.Contains(string(readme), "```go\n"+strings.Join(want, "\n")+"\n```\n") {
		t.Fatalf("README.md does not show the program this test runs:\n%s", strings.Join(want, "\n"))
	}

	dir := t.TempDir()
	grpcAddr, kafkaAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	_, kafkaPort, _ := net.SplitHostPort(kafkaAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, binary, "server", "--dev", "--data-dir", dir, "--listen", grpcAddr,
		"--kafka-listen", kafkaAddr, "--kafka-advertise", "localhost:"+kafkaPort,
		"--controller-listen", testutil.FreeAddr(t), "--inter-broker-listen", testutil.FreeAddr(t), "--metrics-listen", "off", "--log-level", "warn")
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", srvOut.String())
		}
	}()
	run(t, "", "health", "--addr", grpcAddr, "--wait", "30s")
	run(t, "", "topics", "create", "greetings", "--partitions", "1", "--bootstrap", grpcAddr)

	// Metadata names the broker at --kafka-advertise.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr))
	if err != nil {
		t.Fatal(err)
	}
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].Host != "localhost" || fmt.Sprint(md.Brokers[0].Port) != kafkaPort {
		t.Fatalf("metadata brokers %+v, want one at localhost:%s (--kafka-advertise)", md.Brokers, kafkaPort)
	}

	out, err := captureStdout(t, func() error { return readmeFranzGo(ctx, kafkaAddr) })
	if err != nil {
		t.Fatalf("the README's program: %v", err)
	}
	if out != "hello from franz-go\n" {
		t.Fatalf("the README's program printed %q, want the record it wrote", out)
	}
}

// captureStdout runs fn with os.Stdout sent to a pipe and returns what it
// printed.
func captureStdout(t *testing.T, fn func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	err = fn()
	os.Stdout = saved
	w.Close()
	return <-got, err
}

// The Kafka listener's settings: --kafka-advertise needs a listener,
// --socket-request-max-bytes wins over the file's socket.request.max.bytes
// when given, and the file's applies otherwise.
func TestKafkaListenerFlags(t *testing.T) {
	cfg := node.DefaultConfig(1, t.TempDir())
	if err := applyKafkaFlags(&cfg, "", "h:1", 104857600, false); err == nil {
		t.Fatal("--kafka-advertise with the listener off accepted")
	}
	if err := applyKafkaFlags(&cfg, "127.0.0.1:9092", "", 0, true); err == nil {
		t.Fatal("--socket-request-max-bytes 0 accepted")
	}
	if err := applyKafkaFlags(&cfg, "0.0.0.0:9092", "h:19092", 104857600, false); err != nil {
		t.Fatal(err)
	}
	if cfg.KafkaListen != "0.0.0.0:9092" || cfg.KafkaAdvertise != "h:19092" || cfg.SocketRequestMaxBytes != 104857600 {
		t.Fatalf("got listen %q advertise %q max %d", cfg.KafkaListen, cfg.KafkaAdvertise, cfg.SocketRequestMaxBytes)
	}

	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg = node.DefaultConfig(1, t.TempDir())
	if err := applyConfigFile(&cfg, configFile(t, "socket.request.max.bytes: 2048\n"), lg); err != nil {
		t.Fatal(err)
	}
	if err := applyKafkaFlags(&cfg, "127.0.0.1:9092", "", 104857600, false); err != nil {
		t.Fatal(err)
	}
	if cfg.SocketRequestMaxBytes != 2048 {
		t.Fatalf("the file's socket.request.max.bytes 2048 gave %d", cfg.SocketRequestMaxBytes)
	}
	if err := applyKafkaFlags(&cfg, "127.0.0.1:9092", "", 4096, true); err != nil {
		t.Fatal(err)
	}
	if cfg.SocketRequestMaxBytes != 4096 {
		t.Fatalf("--socket-request-max-bytes 4096 over the file's 2048 gave %d", cfg.SocketRequestMaxBytes)
	}
	for _, line := range []string{"socket.request.max.bytes: 0", "socket.request.max.bytes: 2147483648"} {
		if err := applyConfigFile(&cfg, configFile(t, line+"\n"), lg); err == nil {
			t.Errorf("%q accepted, want refused", line)
		}
	}
}
