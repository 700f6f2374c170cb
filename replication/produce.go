package replication

import (
	"context"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Append is one partition's part of a produce request after the append:
// Wait blocks, for acks=all, until the ISR has it.
type Append struct {
	Result storage.AppendResult
	Err    error
	p      *broker.Partition
	epoch  int32
	acks   int32
	m      *Manager
}

// partitionFor returns the local partition or the error a client should see.
func (m *Manager) partitionFor(topic string, partition int32) (*broker.Partition, error) {
	key := storage.PartitionKey{Topic: topic, Partition: partition}
	if p := m.parts.Get(key); p != nil {
		return p, nil
	}
	img := m.Image()
	ip := img.Partition(topic, partition)
	if ip == nil {
		if t := img.Topic(topic); t != nil {
			return nil, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "topic %s has %d partitions, there is no partition %d", topic, len(t.Partitions), partition)
		}
		return nil, errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "this server does not host this topic-partition: %s", key)
	}
	return nil, errs.New(pb.ErrorCode_NOT_LEADER_OR_FOLLOWER, "broker %d holds no replica of %s (leader %d)", m.cfg.NodeID, key, ip.Leader)
}

// Partition returns the local partition for a client request, or its error.
func (m *Manager) Partition(topic string, partition int32) (*broker.Partition, error) {
	return m.partitionFor(topic, partition)
}

// AppendLeader appends a client's batches to a partition this node leads.
// It returns at once; call Wait for acks=all. It does not check
// transaction verification: AppendLeaderVerified does, for a client's
// produce.
func (m *Manager) AppendLeader(topic string, partition int32, records []byte, acks int32) *Append {
	return m.appendLeader(topic, "", partition, records, acks, 0, nil, -1)
}

// AppendLeaderTopic is AppendLeader for the topic with id topicID (""
// skips the check): a partition of another topic of that name (the one
// meant was deleted and created again) is refused UNKNOWN_TOPIC_ID, as
// Kafka's ReplicaManager refuses a produce by topic id, and not written.
func (m *Manager) AppendLeaderTopic(topic, topicID string, partition int32, records []byte, acks int32) *Append {
	return m.appendLeader(topic, topicID, partition, records, acks, 0, nil, -1)
}

// AppendLeaderVerified is AppendLeaderTopic for a client's produce: a
// transactional batch that does not continue its producer's open
// transaction must present guard, the verification the partition made
// before the coordinator was asked, still current; otherwise it is
// refused INVALID_TXN_STATE (broker/storage: verification.go).
func (m *Manager) AppendLeaderVerified(topic, topicID string, partition int32, records []byte, acks int32, guard *storage.VerificationGuard) *Append {
	return m.appendLeader(topic, topicID, partition, records, acks, storage.OriginClient, guard, -1)
}

// AppendLeaderCoordinator is AppendLeader for the group coordinator's
// writes to a __consumer_offsets partition: a transactional offset write
// must present guard, the verification the partition made before the
// transaction coordinator was asked, still current, or it is refused
// INVALID_TXN_STATE and nothing is written (storage.OriginCoordinator);
// leaderEpoch fences it as Partition.AppendCoordinator does.
func (m *Manager) AppendLeaderCoordinator(topic string, partition int32, records []byte, acks int32, guard *storage.VerificationGuard, leaderEpoch int32) *Append {
	return m.appendLeader(topic, "", partition, records, acks, storage.OriginCoordinator, guard, leaderEpoch)
}

func (m *Manager) appendLeader(topic, topicID string, partition int32, records []byte, acks int32, origin storage.AppendOrigin, guard *storage.VerificationGuard, leaderEpoch int32) *Append {
	p, err := m.partitionFor(topic, partition)
	if err == nil {
		err = p.CheckTopicID(topicID, pb.ErrorCode_UNKNOWN_TOPIC_ID)
	}
	if err != nil {
		return &Append{Err: err}
	}
	var res storage.AppendResult
	var epoch int32
	switch origin {
	case storage.OriginClient:
		res, epoch, err = p.AppendVerified(records, acks, guard)
	case storage.OriginCoordinator:
		res, epoch, err = p.AppendCoordinator(records, acks, guard, leaderEpoch)
	default:
		res, epoch, err = p.AppendAsLeader(records, acks)
	}
	a := &Append{Result: res, Err: err, p: p, epoch: epoch, acks: acks, m: m}
	if err == nil && !res.Duplicate {
		m.OnLeaderAppend(p.Key)
	}
	return a
}

// NeedsWait reports whether the answer must wait (call Wait): acks=all,
// or acks=1 on a log whose fsync the append deferred.
func (a *Append) NeedsWait() bool {
	return a.Err == nil && (a.acks == -1 || (a.acks == 1 && a.Result.FlushDeferred))
}

// LeaderEpoch is the leader epoch the append was made under.
func (a *Append) LeaderEpoch() int32 { return a.epoch }

// Wait completes an append. Under flush.messages=1 (a deferred fsync) it
// returns once this leader has fsynced the batch, and for acks=all once the
// HW passes it; REQUEST_TIMED_OUT at ctx's end, NOT_LEADER_OR_FOLLOWER if
// leadership moves first, KAFKA_STORAGE_ERROR if the fsync failed, and
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below
// min.insync.replicas while waiting.
func (a *Append) Wait(ctx context.Context) error {
	if a.Err != nil || a.acks == 0 {
		return a.Err
	}
	if a.Result.FlushDeferred {
		// flush.messages=1: on this leader's disk first (for acks=1 that
		// is all; for acks=all the HW below needs it too, but waiting
		// here reports a failed fsync as itself instead of a timeout).
		if err := a.p.WaitDurable(ctx, a.Result.LastOffset, a.epoch); err != nil {
			return err
		}
	}
	if a.acks != -1 {
		return nil
	}
	if err := a.p.WaitForHW(ctx, a.Result.LastOffset, a.epoch); err != nil {
		return err
	}
	l := a.p.Leadership()
	if n, min := len(l.ISR), a.p.MinISR(); n < min {
		return errs.New(pb.ErrorCode_NOT_ENOUGH_REPLICAS_AFTER_APPEND, "%s: written, but the ISR %v shrank below min.insync.replicas=%d before it was acknowledged", a.p.Key, l.ISR, min)
	}
	return nil
}

// WriteMarker appends a transaction marker on a partition this node leads
// and waits until the ISR has it (markers are always written with acks=all).
//
// A marker the partition already applied (AlreadyDone: the coordinator
// re-sends after a failover, or because the first attempt's answer was
// lost, for example when it timed out waiting for slow followers) is
// answered only once the HW has passed it too: the coordinator writes
// COMPLETE_* on a success, and a marker on the leader alone can still be
// lost by the next leader change. The partition does not record where the
// applied marker is, so the wait is for the log end it saw when it checked
// the repeat, which is above that marker; in the worst case it also waits
// for records appended after the marker, which the HW passes anyway.
func (m *Manager) WriteMarker(ctx context.Context, topic string, partition int32, pid int64, epoch int16, coordinatorEpoch int32, typ record.ControlType, txnVersion int32, timeout time.Duration) (storage.MarkerResult, error) {
	p, err := m.partitionFor(topic, partition)
	if err != nil {
		return storage.MarkerResult{}, err
	}
	res, leaderEpoch, err := p.AppendMarkerVersion(pid, epoch, coordinatorEpoch, typ, txnVersion)
	if err != nil {
		return res, err
	}
	wait := res.Offset
	if res.AlreadyDone {
		if planted.On(planted.MarkerRetryUnreplicated) {
			return res, nil
		} else {
			wait = res.LogEndOffset - 1
		}
	} else {
		m.OnLeaderAppend(p.Key)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return res, p.WaitForHW(wctx, wait, leaderEpoch)
}

// AbortHanging is the administrator's abort of a hanging transaction on a
// partition this node leads (storage.Log.AbortHanging), waited for like a
// marker until the ISR has it.
func (m *Manager) AbortHanging(ctx context.Context, topic string, partition int32, pid int64, epoch int16, startOffset int64, minOpen, timeout time.Duration) (storage.MarkerResult, error) {
	p, err := m.partitionFor(topic, partition)
	if err != nil {
		return storage.MarkerResult{}, err
	}
	res, leaderEpoch, err := p.AbortHanging(pid, epoch, startOffset, minOpen)
	if err != nil {
		return res, err
	}
	m.OnLeaderAppend(p.Key)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return res, p.WaitForHW(wctx, res.Offset, leaderEpoch)
}
