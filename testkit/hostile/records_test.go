package hostile

// Real node on real time: the hostile requests are raw bytes on a real TCP connection
// to the Kafka listener; could dial MemNet inside synctest; not moved yet.

import (
	"context"
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/record"
)

// Byte offsets of batch header fields a hostile client rewrites (Kafka's
// RecordBatch v2 layout).
const (
	hdrCRC             = 17
	hdrAttributes      = 21
	hdrLastOffsetDelta = 23
	hdrRecordCount     = 57
)

// rawBatch builds an uncompressed batch of vals at timestamp ts, as the
// SDK would, then lets mutate change it; the CRC is fixed afterwards, so
// only the change is wrong.
func rawBatch(t *testing.T, ts int64, mutate func(b []byte), vals ...string) []byte {
	t.Helper()
	recs := make([]record.Record, len(vals))
	for i, v := range vals {
		recs[i] = record.Record{Value: []byte(v), Timestamp: ts}
	}
	b, err := record.Build(record.BatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(b)
		binary.BigEndian.PutUint32(b[hdrCRC:], record.ComputeCRC(b))
	}
	return b
}

// produceRaw sends one acks=all Produce request of records on a raw stream
// and returns the partition's answer.
func (tg *target) produceRaw(topic string, records []byte) *pb.ProducePartitionResponse {
	tg.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := pb.NewProducerClient(tg.raw(tg.clientAddrs()[0])).Produce(ctx)
	if err != nil {
		tg.t.Fatal(err)
	}
	if err := st.Send(&pb.ProduceRequest{CorrelationId: 1, Acks: -1, TimeoutMs: 10_000,
		Partitions: []*pb.PartitionRecords{{Topic: topic, Partition: 0, Records: records}}}); err != nil {
		tg.t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		tg.t.Fatal(err)
	}
	_ = st.CloseSend()
	if len(resp.Partitions) != 1 {
		tg.t.Fatalf("answer for %d partitions, want 1", len(resp.Partitions))
	}
	return resp.Partitions[0]
}

// TestBadBatchesAreRefused sends each malformed batch a hostile-client
// probe once got accepted: each is refused with Kafka's code and a message naming the
// problem (and the records at fault), the log end does not move, the
// acknowledged records stay readable, a valid batch afterwards lands at
// the next offset, and the node still serves others.
func TestBadBatchesAreRefused(t *testing.T) {
	tg := devTarget(t)
	const topic = "records"
	tg.createTopic(topic, 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(tg.opts(client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	acked := []string{"ack-0", "ack-1", "ack-2"}
	for _, v := range acked {
		if err := p.ProduceSync(ctx, &client.Record{Topic: topic, Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	now := time.Now().UnixMilli()
	three := []string{"x", "y", "z"}
	cases := []struct {
		name    string
		batch   []byte
		code    pb.ErrorCode
		want    string
		records []int32
	}{
		{"record count lies (5 for 3 records)", rawBatch(t, now, func(b []byte) {
			binary.BigEndian.PutUint32(b[hdrRecordCount:], 5)
			binary.BigEndian.PutUint32(b[hdrLastOffsetDelta:], 4)
		}, three...), pb.ErrorCode_INVALID_RECORD, "recordCount 5 but the records section ends after 3 records", []int32{3}},
		{"lastOffsetDelta MaxInt32", rawBatch(t, now, func(b []byte) {
			binary.BigEndian.PutUint32(b[hdrLastOffsetDelta:], math.MaxInt32)
		}, three...), pb.ErrorCode_INVALID_RECORD, "lastOffsetDelta 2147483647 spans 2147483648 offsets but recordCount is 3", nil},
		{"garbage record bytes", rawBatch(t, now, func(b []byte) {
			for i := record.HeaderSize; i < len(b); i++ {
				b[i] = 0xff
			}
		}, three...), pb.ErrorCode_INVALID_RECORD, "record 0 at byte 0 of the records section: record length: varint longer than 5 bytes", []int32{0}},
		{"gzip flag on uncompressed bytes", rawBatch(t, now, func(b []byte) {
			binary.BigEndian.PutUint16(b[hdrAttributes:], uint16(record.Gzip))
		}, three...), pb.ErrorCode_CORRUPT_MESSAGE, "gzip records section does not decompress", nil},
		{"timestamp two hours ahead", rawBatch(t, now+2*3600_000, nil, three...), pb.ErrorCode_INVALID_TIMESTAMP,
			"3 of 3 records have a timestamp out of range (message.timestamp.before.max.ms=9223372036854775807, message.timestamp.after.max.ms=3600000)", []int32{0, 1, 2}},
		{"control batch from a client", record.BuildControlBatch(1, 0, record.ControlCommit, 0, now), pb.ErrorCode_INVALID_RECORD,
			"clients may not write control batches", nil},
	}
	end := tg.logEnd(topic, 0)
	if end != int64(len(acked)) {
		t.Fatalf("log end %d after %d acknowledged records", end, len(acked))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := tg.produceRaw(topic, c.batch)
			if r.ErrorCode != c.code || !strings.Contains(r.ErrorMessage, c.want) {
				t.Errorf("answer %s %q, want %s saying %q", r.ErrorCode, r.ErrorMessage, c.code, c.want)
			}
			var idx []int32
			for _, re := range r.RecordErrors {
				idx = append(idx, re.BatchIndex)
			}
			if !slices.Equal(idx, c.records) {
				t.Errorf("record errors at %v, want %v", idx, c.records)
			}
			if got := tg.logEnd(topic, 0); got != end {
				t.Errorf("log end moved from %d to %d", end, got)
			}
		})
	}

	good := tg.produceRaw(topic, rawBatch(t, time.Now().UnixMilli(), nil, "after-0", "after-1"))
	if good.ErrorCode != pb.ErrorCode_NONE || good.BaseOffset != end {
		t.Fatalf("valid batch after the refusals: %s %q at offset %d, want NONE at %d", good.ErrorCode, good.ErrorMessage, good.BaseOffset, end)
	}
	want := append(slices.Clone(acked), "after-0", "after-1")
	if got := tg.readAll(topic, 0, client.ReadUncommitted, len(want)); !slices.Equal(got, want) {
		t.Fatalf("read back %q, want %q", got, want)
	}
	tg.assertServes()
}

// TestBadTimestampRefusedForSDK: the SDK surfaces the refusal with its code
// (errors.As *errs.Error), not retrying a batch that can never be accepted.
func TestBadTimestampRefusedForSDK(t *testing.T) {
	tg := devTarget(t)
	const topic = "records-sdk"
	tg.createTopic(topic, 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(tg.opts(client.WithPartitioner(client.ManualPartitioner{}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	err = p.ProduceSync(ctx, &client.Record{Topic: topic, Partition: 0, Value: []byte("future"), Timestamp: time.Now().Add(3 * time.Hour)}).FirstErr()
	if errs.CodeOf(err) != pb.ErrorCode_INVALID_TIMESTAMP {
		t.Fatalf("a record three hours ahead: %v, want INVALID_TIMESTAMP", err)
	}
	if end := tg.logEnd(topic, 0); end != 0 {
		t.Fatalf("log end %d after a refused record", end)
	}
}
