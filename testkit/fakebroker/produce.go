package fakebroker

import (
	"fmt"
	"sync"

	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// dedupeWindow is how many of a producer's latest batches a partition
// remembers to recognise a retried one (Kafka keeps five, the most a
// producer may have in flight with idempotence).
const dedupeWindow = 5

type partition struct {
	batches   []Batch
	end       int64 // log end offset
	producers map[int64]*producerState
}

type producerState struct {
	epoch  int16
	recent []Batch // the latest dedupeWindow batches, oldest first
}

// Batch is a batch the broker appended.
type Batch struct {
	Header record.Header // as sent (BaseOffset: where it was appended)
	Size   int           // bytes
	Values [][]byte      // the records' values, in order
	data   []byte        // the batch with its base offset set
}

// ProduceRequest is what the broker saw of a produce request.
type ProduceRequest struct {
	CorrelationID int64
	Acks          int32
	Bytes         int     // records bytes, all partitions
	Partitions    []int32 // the partitions it carried, in order
	Refused       bool    // a ProduceControl refused it
}

// ProduceControl decides about the n-th produce request (from 1, counted
// over all streams) when it arrives, before the broker handles it. Its
// calls do not overlap.
type ProduceControl func(n int, req *pb.ProduceRequest) ProduceAction

// ProduceAction is a ProduceControl's decision. The zero value lets the
// broker handle the request and answer at once.
type ProduceAction struct {
	// Code, if not NONE, answers every partition of the request with it
	// (and Message); nothing is appended.
	Code    pb.ErrorCode
	Message string
	// Hold, if not nil, delays the answer until it is closed. The
	// request is handled (appended) on arrival all the same, and the
	// answers after it on its stream wait behind it: a stream is answered
	// in order, as a connection to a Kafka broker is.
	Hold <-chan struct{}
	// Drop: handle the request but never answer it.
	Drop bool
	// ThrottleMs, if positive, is the answer's throttle_time_ms (a client
	// quota); the fake broker itself does not mute the stream.
	ThrottleMs int32
}

// ControlProduce sets the ProduceControl (nil: none).
func (b *Broker) ControlProduce(fn ProduceControl) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.produceCtl = fn
}

// ProduceRequests lists the produce requests seen, in arrival order.
func (b *Broker) ProduceRequests() []ProduceRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]ProduceRequest(nil), b.requests...)
}

// Batches lists the batches appended to a partition.
func (b *Broker) Batches(topic string, p int32) []Batch {
	b.mu.Lock()
	defer b.mu.Unlock()
	if pp := b.partitionLocked(topic, p); pp != nil {
		return append([]Batch(nil), pp.batches...)
	}
	return nil
}

// Values lists the values of the records appended to a partition, in
// offset order.
func (b *Broker) Values(topic string, p int32) []string {
	var out []string
	for _, bt := range b.Batches(topic, p) {
		for _, v := range bt.Values {
			out = append(out, string(v))
		}
	}
	return out
}

// OutOfOrder counts the batches refused OUT_OF_ORDER_SEQUENCE_NUMBER.
func (b *Broker) OutOfOrder() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.outOfOrder
}

// pending is an answer waiting for its turn on a stream.
type pending struct {
	resp *pb.ProduceResponse
	hold <-chan struct{}
}

// Produce handles a produce stream: requests are handled as they arrive,
// answers go out in arrival order.
func (b *Broker) Produce(stream pb.Producer_ProduceServer) error {
	ctx := stream.Context()
	queue := make(chan pending, 1024)
	sendErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the stream's sender; ends with the stream
		defer wg.Done()
		for p := range queue {
			if p.hold != nil {
				select {
				case <-p.hold:
				case <-ctx.Done():
					return
				}
			}
			if err := stream.Send(p.resp); err != nil {
				sendErr <- err
				return
			}
		}
	}()
	defer wg.Wait()
	defer close(queue)
	for {
		r, err := stream.Recv()
		if err != nil {
			return err
		}
		resp, act := b.produce(r)
		if act.Drop || r.Acks == 0 {
			continue
		}
		if act.ThrottleMs > 0 {
			resp.ThrottleTimeMs = act.ThrottleMs
		}
		select {
		case queue <- pending{resp: resp, hold: act.Hold}:
		case err := <-sendErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// produce handles one request and returns its answer.
func (b *Broker) produce(r *pb.ProduceRequest) (*pb.ProduceResponse, ProduceAction) {
	info := ProduceRequest{CorrelationID: r.CorrelationId, Acks: r.Acks}
	for _, p := range r.Partitions {
		info.Bytes += len(p.Records)
		info.Partitions = append(info.Partitions, p.Partition)
	}
	// One request at a time past the control, so that it sees them in
	// the order they are counted.
	b.ctlMu.Lock()
	b.mu.Lock()
	n := len(b.requests) + 1
	ctl := b.produceCtl
	b.mu.Unlock()
	var act ProduceAction
	if ctl != nil {
		act = ctl(n, r)
	}
	info.Refused = act.Code != pb.ErrorCode_NONE
	b.mu.Lock()
	b.requests = append(b.requests, info)
	b.mu.Unlock()
	b.ctlMu.Unlock()
	resp := &pb.ProduceResponse{CorrelationId: r.CorrelationId}
	for _, p := range r.Partitions {
		pr := &pb.ProducePartitionResponse{Topic: p.Topic, Partition: p.Partition, BaseOffset: -1}
		switch {
		case act.Code != pb.ErrorCode_NONE:
			pr.ErrorCode, pr.ErrorMessage = act.Code, act.Message
		default:
			if code := b.refused("Produce"); code != pb.ErrorCode_NONE {
				pr.ErrorCode, pr.ErrorMessage = code, RefusalMessage
			} else {
				pr.BaseOffset, pr.ErrorCode, pr.ErrorMessage = b.appendRecords(p.Topic, p.Partition, p.Records)
			}
		}
		resp.Partitions = append(resp.Partitions, pr)
	}
	return resp, act
}

// appendRecords appends the batches of one partition's records, with the
// idempotent producer's checks, and returns the first's base offset.
func (b *Broker) appendRecords(topic string, p int32, data []byte) (int64, pb.ErrorCode, string) {
	type parsed struct {
		h      record.Header
		batch  []byte
		values [][]byte
	}
	var batches []parsed
	for it := record.NewIter(data); it.Next(); {
		batch := it.Batch()
		h, err := record.Validate(batch)
		if err != nil {
			return -1, pb.ErrorCode_CORRUPT_MESSAGE, err.Error()
		}
		_, recs, err := record.Decode(batch)
		if err != nil {
			return -1, pb.ErrorCode_CORRUPT_MESSAGE, err.Error()
		}
		pr := parsed{h: h, batch: append([]byte(nil), batch...)}
		for _, rec := range recs {
			pr.values = append(pr.values, append([]byte(nil), rec.Value...))
		}
		batches = append(batches, pr)
	}
	if len(batches) == 0 {
		return -1, pb.ErrorCode_CORRUPT_MESSAGE, "no record batch"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[topic]
	pp := b.partitionLocked(topic, p)
	if pp == nil {
		return -1, pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, fmt.Sprintf("%s-%d is not on this broker", topic, p)
	}
	first := int64(-1)
	for _, bt := range batches {
		if t.maxMessageBytes > 0 && len(bt.batch) > int(t.maxMessageBytes) {
			return -1, pb.ErrorCode_MESSAGE_TOO_LARGE, fmt.Sprintf("batch of %d bytes over max.message.bytes %d", len(bt.batch), t.maxMessageBytes)
		}
		base, code, msg := pp.checkSequence(bt.h)
		if code == pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER {
			b.outOfOrder++
		}
		if code != pb.ErrorCode_NONE {
			return -1, code, msg
		}
		if base < 0 { // not a duplicate: append
			base = pp.end
			record.SetBaseOffset(bt.batch, base)
			h := bt.h
			h.BaseOffset = base
			appended := Batch{Header: h, Size: len(bt.batch), Values: bt.values, data: bt.batch}
			pp.batches = append(pp.batches, appended)
			pp.end = h.NextOffset()
			if h.HasProducerID() {
				pp.remember(appended)
			}
			close(b.changed)
			b.changed = make(chan struct{})
		}
		if first < 0 {
			first = base
		}
	}
	return first, pb.ErrorCode_NONE, ""
}

// checkSequence applies the idempotent producer's rules to a batch: a
// producer id the partition does not know, or a newer epoch, starts at any
// sequence (its state may have expired, KIP-360); a known one goes on at
// its last sequence plus one; a batch among its latest five is a
// duplicate, answered with the offset it was appended at (base >= 0).
func (pp *partition) checkSequence(h record.Header) (base int64, code pb.ErrorCode, msg string) {
	if !h.HasProducerID() {
		return -1, pb.ErrorCode_NONE, ""
	}
	st := pp.producers[h.ProducerID]
	switch {
	case st == nil || h.ProducerEpoch > st.epoch:
		return -1, pb.ErrorCode_NONE, ""
	case h.ProducerEpoch < st.epoch:
		return -1, pb.ErrorCode_INVALID_PRODUCER_EPOCH, fmt.Sprintf("epoch %d is older than %d", h.ProducerEpoch, st.epoch)
	}
	for _, r := range st.recent {
		if r.Header.BaseSequence == h.BaseSequence && r.Header.LastSequence() == h.LastSequence() {
			return r.Header.BaseOffset, pb.ErrorCode_NONE, ""
		}
	}
	last := st.recent[len(st.recent)-1].Header.LastSequence()
	if want := record.IncrementSequence(last, 1); h.BaseSequence != want {
		return -1, pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, fmt.Sprintf("expected %d, received %d", want, h.BaseSequence)
	}
	return -1, pb.ErrorCode_NONE, ""
}

// remember adds an appended batch to its producer's window.
func (pp *partition) remember(bt Batch) {
	st := pp.producers[bt.Header.ProducerID]
	if st == nil || bt.Header.ProducerEpoch > st.epoch {
		st = &producerState{epoch: bt.Header.ProducerEpoch}
		pp.producers[bt.Header.ProducerID] = st
	}
	st.recent = append(st.recent, bt)
	if len(st.recent) > dedupeWindow {
		st.recent = st.recent[1:]
	}
}
