package client

import (
	"time"

	"github.com/strand-io/strand/record"
)

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is a record to produce, or one consumed. Topic, Key, Value,
// Headers and Timestamp are the caller's; the rest is filled in when the
// record is acknowledged or fetched.
type Record struct {
	Topic string
	// Partition is honoured only with ManualPartitioner; otherwise the
	// partitioner sets it.
	Partition int32
	Key       []byte
	Value     []byte
	Headers   []Header
	// Timestamp defaults to the time of Produce.
	Timestamp time.Time

	Offset        int64
	LeaderEpoch   int32
	ProducerID    int64
	ProducerEpoch int16
	// Transactional is set on consumed records written in a transaction.
	Transactional bool
}

func (r *Record) toWire() record.Record {
	var hs []record.RecordHeader
	if len(r.Headers) > 0 {
		hs = make([]record.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = record.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return record.Record{Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp.UnixMilli()}
}

// ManualPartitioner sends each record to the partition it names.
type ManualPartitioner struct{}

// Partition implements Partitioner.
func (ManualPartitioner) Partition(rec *Record, n int) int32 { return rec.Partition }

// OnNewBatch implements Partitioner.
func (ManualPartitioner) OnNewBatch(string, int) {}
