package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/strand-io/strand/client"
)

// The admin client creates topics and reads the cluster's state.
func ExampleAdmin() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := client.NewAdmin(client.Bootstrap(bootstrap))
	if err != nil {
		log.Fatal(err)
	}
	defer adm.Close()

	err = adm.CreateTopic(ctx, client.TopicSpec{Name: "inventory", Partitions: 3, ReplicationFactor: 1,
		Configs: map[string]string{"retention.ms": "86400000"}})
	if errors.Is(err, client.ErrTopicAlreadyExists) {
		err = nil // made by an earlier run
	}
	if err != nil {
		log.Fatal(err)
	}

	md, err := adm.Metadata(ctx, false, "inventory")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d partitions\n", md.Topics[0].Name, len(md.Topics[0].Partitions))

	entries, err := adm.DescribeTopicConfigs(ctx, "inventory")
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		if e.Name == "retention.ms" {
			fmt.Printf("%s=%s (%s)\n", e.Name, e.Value, e.Source)
		}
	}

	tp := client.TopicPartition{Topic: "inventory", Partition: 0}
	offs, err := adm.ListOffsets(ctx, []client.TopicPartition{tp}, client.OffsetLatest, client.ReadCommitted)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: high watermark %d, last stable offset %d\n", tp, offs[tp].HighWatermark, offs[tp].LastStableOffset)
	// Output:
	// inventory: 3 partitions
	// retention.ms=86400000 (topic)
	// inventory-0: high watermark 0, last stable offset 0
}

// Every error the SDK returns that carries a broker's error code matches
// that code's sentinel (errors.Is) and gives it with errors.As; a call that
// ran out of time also matches context.DeadlineExceeded; Classify says how
// to handle it. Here a record for a topic that does not exist fails once
// delivery.timeout.ms has passed: UNKNOWN_TOPIC_OR_PARTITION is retriable
// (the topic may be being created).
func ExampleClassify() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(client.Bootstrap(bootstrap), client.DeliveryTimeout(8*time.Second), client.RequestTimeout(3*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)

	err = p.ProduceSync(ctx, &client.Record{Topic: "no-such-topic", Value: []byte("x")}).FirstErr()
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println("code:", e.Code)
	}
	fmt.Println("unknown topic:", errors.Is(err, client.ErrUnknownTopicOrPartition))
	fmt.Println("delivery timeout:", errors.Is(err, client.ErrDeliveryTimeout), errors.Is(err, context.DeadlineExceeded))
	fmt.Println("category:", client.Classify(err))
	fmt.Println("no error:", client.Classify(nil))
	// Output:
	// code: UNKNOWN_TOPIC_OR_PARTITION
	// unknown topic: true
	// delivery timeout: true true
	// category: retriable
	// no error: none
}
