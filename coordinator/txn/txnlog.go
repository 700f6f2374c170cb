package txn

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Transaction log records (in __transaction_state):
//
//	key   = int16 version (0) · int16 length · transactionalId bytes
//	value = int16 version (1) · TransactionLogValue (protobuf); none for a tombstone
//
// The last record of a key wins; a tombstone forgets the id.

const (
	keyVersion   = 0
	valueVersion = 1
)

// EncodeKey encodes a transaction log key.
func EncodeKey(id string) []byte {
	b := make([]byte, 4+len(id))
	binary.BigEndian.PutUint16(b, keyVersion)
	binary.BigEndian.PutUint16(b[2:], uint16(len(id)))
	copy(b[4:], id)
	return b
}

// DecodeKey decodes a transaction log key.
func DecodeKey(b []byte) (string, error) {
	if len(b) < 4 || binary.BigEndian.Uint16(b) != keyVersion {
		return "", fmt.Errorf("transaction log key: bad header")
	}
	n := int(binary.BigEndian.Uint16(b[2:]))
	if len(b) != 4+n {
		return "", fmt.Errorf("transaction log key: length %d, have %d bytes", n, len(b)-4)
	}
	return string(b[4:]), nil
}

// EncodeValue encodes a transaction log value.
func EncodeValue(v *pb.TransactionLogValue) ([]byte, error) {
	body, err := proto.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 2, 2+len(body))
	binary.BigEndian.PutUint16(out, valueVersion)
	return append(out, body...), nil
}

// NewerVersionError is a transaction log value written by a newer binary
// (a version above the one this binary writes). Loading stops at it:
// skipping it would leave the id at an older state, and reading it as the
// known version would misread it.
type NewerVersionError struct{ Version int16 }

func (e *NewerVersionError) Error() string {
	return fmt.Sprintf("transaction log value version %d was written by a newer Strand (this binary reads version %d): run a newer binary on this node", e.Version, valueVersion)
}

// DecodeValue decodes a value; nil (a tombstone) gives nil.
func DecodeValue(b []byte) (*pb.TransactionLogValue, error) {
	if b == nil {
		return nil, nil
	}
	if len(b) < 2 {
		return nil, fmt.Errorf("transaction log value: %d bytes, no version", len(b))
	}
	if v := int16(binary.BigEndian.Uint16(b)); v > valueVersion {
		return nil, &NewerVersionError{Version: v}
	} else if v != valueVersion {
		return nil, fmt.Errorf("transaction log value: unknown version %d", v)
	}
	var v pb.TransactionLogValue
	if err := proto.Unmarshal(b[2:], &v); err != nil {
		return nil, fmt.Errorf("transaction log value: %w", err)
	}
	return &v, nil
}

// DecodeJSON renders a transaction log record as kafka-dump-log 4.x's
// --transaction-log-decoder prints it.
func DecodeJSON(key, value []byte) string {
	id, err := DecodeKey(key)
	if err != nil {
		return fmt.Sprintf("key: <unreadable: %v> payload: <skipped>", err)
	}
	type keyData struct {
		TransactionalID string `json:"transactionalId"`
	}
	k, _ := json.Marshal(struct {
		Type string  `json:"type"`
		Data keyData `json:"data"`
	}{"0", keyData{id}})
	if value == nil {
		return fmt.Sprintf("key: %s payload: <DELETE>", k)
	}
	v, err := DecodeValue(value)
	if err != nil {
		return fmt.Sprintf("key: %s payload: <unreadable: %v>", k, err)
	}
	type part struct {
		Topic        string  `json:"topic"`
		PartitionIDs []int32 `json:"partitionIds"`
	}
	parts := []part{}
	for _, tl := range v.TransactionPartitions {
		parts = append(parts, part{tl.Topic, tl.PartitionIds})
	}
	data := struct {
		ProducerID          int64  `json:"producerId"`
		PreviousProducerID  int64  `json:"previousProducerId"`
		NextProducerID      int64  `json:"nextProducerId"`
		ProducerEpoch       int32  `json:"producerEpoch"`
		TransactionTimeout  int32  `json:"transactionTimeoutMs"`
		TransactionStatus   int32  `json:"transactionStatus"`
		TransactionState    string `json:"transactionState"`
		Partitions          []part `json:"transactionPartitions"`
		LastUpdateTimestamp int64  `json:"transactionLastUpdateTimestampMs"`
		StartTimestamp      int64  `json:"transactionStartTimestampMs"`
		ClientTxnVersion    int32  `json:"clientTransactionVersion"`
	}{v.ProducerId, v.PreviousProducerId, v.NextProducerId, v.ProducerEpoch, v.TransactionTimeoutMs, v.TransactionStatus, State(v.TransactionStatus).String(),
		parts, v.TransactionLastUpdateTimestampMs, v.TransactionStartTimestampMs, v.ClientTransactionVersion}
	p, _ := json.Marshal(struct {
		Version string `json:"version"`
		Data    any    `json:"data"`
	}{"1", data})
	return fmt.Sprintf("key: %s payload: %s", k, p)
}
