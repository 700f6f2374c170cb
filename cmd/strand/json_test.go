package main

// Real node on real time: the strand CLI under test dials its --bootstrap address
// over real TCP; it has no in-memory dialer that could reach MemNet.

import (
	"encoding/json"
	"testing"

	"github.com/strand-io/strand/testkit/testutil"
)

// --format json prints numbers as JSON numbers (they were strings) and a
// missing value (None in the table) as null, keys in column order.
func TestTransactionsJSONHasNumbers(t *testing.T) {
	n := testutil.StartDev(t, t.TempDir())
	b := "--bootstrap=" + n.Addr()
	run(t, "", "topics", "create", "js", "--partitions", "1", b)
	run(t, "v1\n", "produce", "js", "--transactional-id", "json-writer", b)
	decode := func(args ...string) []map[string]any {
		t.Helper()
		out := run(t, "", append(append([]string{"transactions"}, args...), "--format", "json", b)...)
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("transactions %v --format json: %v\n%s", args, err, out)
		}
		if len(rows) == 0 {
			t.Fatalf("transactions %v --format json: no rows\n%s", args, out)
		}
		return rows
	}
	isNumber := func(row map[string]any, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if _, ok := row[k].(float64); !ok {
				t.Errorf("%s is %T %v, want a JSON number (row %v)", k, row[k], row[k], row)
			}
		}
	}
	isNull := func(row map[string]any, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if v, ok := row[k]; !ok || v != nil {
				t.Errorf("%s is %v, want null (row %v)", k, v, row)
			}
		}
	}
	list := decode("list")
	isNumber(list[0], "Coordinator", "ProducerId")
	if list[0]["TransactionalId"] != "json-writer" {
		t.Errorf("TransactionalId %v", list[0]["TransactionalId"])
	}
	desc := decode("describe", "--transactional-id", "json-writer")
	isNumber(desc[0], "CoordinatorId", "ProducerId", "ProducerEpoch", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs")
	prods := decode("describe-producers", "--topic", "js", "--partition", "0")
	isNumber(prods[0], "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp")
	isNull(prods[0], "CurrentTransactionStartOffset")
	blk := decode("blocking", "--topic", "js", "--partition", "0")
	isNumber(blk[0], "Partition", "HighWatermark", "LastStableOffset")
	isNull(blk[0], "ProducerId", "TransactionalId")
	if out := run(t, "", "transactions", "find-hanging", "--topic", "js", "--format", "json", b); out != "[]\n" {
		t.Errorf("find-hanging with nothing hanging printed %q, want []", out)
	}
}
