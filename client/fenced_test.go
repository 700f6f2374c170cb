package client

// Real node on real time: predates the simulation; could run on testcluster's
// MemNet inside synctest; not moved yet.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/wait"
)

// TestStaticMemberFencedStops: when another process joins with a static
// consumer's group.instance.id, the consumer's next call is answered
// FENCED_INSTANCE_ID (it names its instance id on every call); it drops
// its partitions, Poll returns ErrFencedInstanceID from then on, and it
// does not rejoin — rejoining would fence the other process in turn, and
// the two would take the membership from each other for ever (as in
// Kafka's consumer, the error is fatal).
func TestStaticMemberFencedStops(t *testing.T) {
	staticFenced(t, "fence", false)
	t.Run("planted", func(t *testing.T) {
		defer planted.Set(planted.ClientIgnoresInstanceFencing)()
		staticFenced(t, "fence-planted", true)
	})
}

func staticFenced(t *testing.T, name string, wantPingPong bool) {
	n := devGroupNode(t)
	adm, _ := NewAdmin(Bootstrap(n.Addr()))
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adm.CreateTopic(ctx, TopicSpec{Name: name, Partitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lost int
	var pollErrs []error
	c, err := NewConsumer(groupOpts(n.Addr(), "g-"+name, name, GroupInstanceID("pod"),
		OnPartitionsLost(func(tps []TopicPartition) { mu.Lock(); lost += len(tps); mu.Unlock() }))...)
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for pctx.Err() == nil {
			_, err := c.Poll(pctx)
			if err != nil && pctx.Err() == nil {
				mu.Lock()
				pollErrs = append(pollErrs, err)
				mu.Unlock()
				if errors.Is(err, ErrFencedInstanceID) {
					return // an application closes a fenced consumer
				}
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		<-done
		c.Close(context.Background())
	})
	wait.Eventually(t, 10*time.Second, "the assignment", func() bool { return len(c.Assignment()) == 2 })
	before := c.GroupMetadata()

	// A second process starts with the same group.instance.id.
	gc := groupsClient(t, n.Addr())
	meta := encodeSubscription(subscription{topics: []string{name}, generation: -1})
	jr, err := gc.JoinGroup(ctx, &pb.JoinGroupRequest{GroupId: "g-" + name, SessionTimeoutMs: 10000, RebalanceTimeoutMs: 10000, GroupInstanceId: "pod",
		ProtocolType: "consumer", ClientId: "twin", Protocols: []*pb.GroupProtocol{{Name: "range", Metadata: meta}}})
	if err != nil || jr.ErrorCode != pb.ErrorCode_NONE || jr.GenerationId != before.GenerationID || jr.MemberId == before.MemberID {
		t.Fatalf("twin join %v %v (consumer was %+v)", jr, err, before)
	}
	twin := func() pb.ErrorCode {
		hb, err := gc.Heartbeat(ctx, &pb.HeartbeatRequest{GroupId: "g-" + name, GenerationId: jr.GenerationId, MemberId: jr.MemberId, GroupInstanceId: "pod"})
		if err != nil {
			t.Fatal(err)
		}
		return hb.ErrorCode
	}
	if wantPingPong {
		// The bug: the fenced consumer rejoins and fences the twin.
		wait.Eventually(t, 10*time.Second, "the fenced consumer to take the instance id back", func() bool { return twin() == pb.ErrorCode_FENCED_INSTANCE_ID })
		return
	}
	wait.Eventually(t, 10*time.Second, "Poll to report the fencing", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(pollErrs) > 0
	})
	<-done
	mu.Lock()
	if len(pollErrs) != 1 || !errors.Is(pollErrs[0], ErrFencedInstanceID) || lost != 2 {
		t.Fatalf("poll errors %v, %d partitions lost; want one ErrFencedInstanceID and both partitions lost", pollErrs, lost)
	}
	mu.Unlock()
	if a := c.Assignment(); len(a) != 0 {
		t.Fatalf("a fenced consumer still reads %v", a)
	}
	// It stays fenced: Poll keeps answering the error, commits are refused,
	// and the twin keeps the membership.
	for i := 0; i < 3; i++ {
		if _, err := c.Poll(ctx); !errors.Is(err, ErrFencedInstanceID) {
			t.Fatalf("poll after the fencing: %v", err)
		}
	}
	if err := c.CommitOffsets(ctx, map[TopicPartition]int64{{name, 0}: 1}); !errors.Is(err, ErrFencedInstanceID) {
		t.Fatalf("commit after the fencing: %v", err)
	}
	if code := twin(); code != pb.ErrorCode_NONE {
		t.Fatalf("the twin's heartbeat: %v", code)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("close of a fenced consumer: %v", err)
	}
	if code := twin(); code != pb.ErrorCode_NONE {
		t.Fatalf("the twin's heartbeat after the fenced consumer closed: %v", code)
	}
}
