package request

import (
	"fmt"
	"math"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// What a request may carry, checked where it enters. Kafka's
// protocol bounds what protobuf does not: a string is at most 32767 bytes
// (its length is an int16), and some integers are int16 or int8 on
// Kafka's wire while protobuf carries them as int32. Strand stores ids
// with an int16 length too (the __transaction_state and
// __consumer_offsets keys), so a longer id would be cut when written and
// unreadable after a restart; an epoch of 40 000 would wrap to -25 536.
// Such requests are refused with INVALID_REQUEST before anything is
// looked up or stored.

// MaxStringBytes is Kafka's string limit: an id, a name or a protocol
// string is at most this many bytes.
const MaxStringBytes = math.MaxInt16

// ListPageBytes bounds one page of a List* answer (ListTransactions):
// far under the transport's message limit (wire.MaxMessageSize), however
// many ids match. A listing holds at most one id of MaxStringBytes, so a
// page always has room for one.
const ListPageBytes = 1 << 20

// checkString refuses s when it is longer than Kafka's string limit; what
// names the field.
func checkString(what, s string) error {
	if len(s) > MaxStringBytes {
		return errs.New(pb.ErrorCode_INVALID_REQUEST, "the %s is %d bytes; Kafka's protocol allows at most %d", what, len(s), MaxStringBytes)
	}
	return nil
}

// checkStrings is checkString over pairs of (what, value).
func checkStrings(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := checkString(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// checkInt16 refuses v outside int16: a field that is INT16 in Kafka's
// protocol (a producer epoch, a replication factor).
func checkInt16(what string, v int32) error {
	if v < math.MinInt16 || v > math.MaxInt16 {
		return errs.New(pb.ErrorCode_INVALID_REQUEST, "%s %d does not fit Kafka's INT16 field [%d, %d]", what, v, math.MinInt16, math.MaxInt16)
	}
	return nil
}

// checkInt8 refuses v outside int8 (a transaction version).
func checkInt8(what string, v int32) error {
	if v < math.MinInt8 || v > math.MaxInt8 {
		return errs.New(pb.ErrorCode_INVALID_REQUEST, "%s %d does not fit Kafka's INT8 field [%d, %d]", what, v, math.MinInt8, math.MaxInt8)
	}
	return nil
}

// checkIsolation refuses an isolation level outside the enum (Kafka's
// INT8 field holds 0 or 1; anything else is not read_uncommitted).
func checkIsolation(l pb.IsolationLevel) error {
	switch l {
	case pb.IsolationLevel_READ_UNCOMMITTED, pb.IsolationLevel_READ_COMMITTED:
		return nil
	}
	return errs.New(pb.ErrorCode_INVALID_REQUEST, "isolation level %d is neither 0 (read_uncommitted) nor 1 (read_committed)", int32(l))
}

// shortID is how an id too long to echo is named in an answer: its
// length, not its bytes.
func shortID(id string) string {
	if len(id) > MaxStringBytes {
		return fmt.Sprintf("<%d bytes>", len(id))
	}
	return id
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// missingPartitions reports, per partition, UNKNOWN_TOPIC_OR_PARTITION for
// those that do not exist in this broker's metadata, or nil when every
// partition exists.
func (h *Handler) missingPartitions(tps []*pb.TopicPartition) []error {
	return missingIn(h, len(tps), func(i int) (string, int32) { return tps[i].Topic, tps[i].Partition })
}

func missingIn(d *Handler, n int, at func(int) (string, int32)) []error {
	if d.Repl == nil {
		return nil
	}
	img := d.Repl.Image()
	var out []error
	for i := 0; i < n; i++ {
		topic, p := at(i)
		if img.Partition(topic, p) != nil {
			continue
		}
		if out == nil {
			out = make([]error, n)
		}
		out[i] = unknownPartition(topic, p)
	}
	return out
}

func unknownPartition(topic string, p int32) error {
	return errs.New(pb.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION, "partition %d of topic '%s' does not exist", p, shortID(topic))
}
