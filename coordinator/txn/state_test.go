package txn

import "testing"

// TestStateTransitions walks every from→to pair: exactly Kafka's table of
// valid previous states is allowed, and Metadata.begin refuses the rest.
func TestStateTransitions(t *testing.T) {
	legal := map[[2]State]bool{}
	for to, froms := range map[State][]State{
		Empty:             {Empty, CompleteCommit, CompleteAbort},
		Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
		PrepareCommit:     {Ongoing, Empty, CompleteCommit, CompleteAbort},
		PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort},
		CompleteCommit:    {PrepareCommit},
		CompleteAbort:     {PrepareAbort},
		Dead:              {Empty, CompleteAbort, CompleteCommit},
		PrepareEpochFence: {Ongoing},
	} {
		for _, f := range froms {
			legal[[2]State{f, to}] = true
		}
	}
	for _, from := range AllStates() {
		for _, to := range AllStates() {
			want := legal[[2]State{from, to}]
			t.Run(from.String()+"->"+to.String(), func(t *testing.T) {
				if got := CanTransition(from, to); got != want {
					t.Fatalf("CanTransition = %v, want %v", got, want)
				}
				m := newMetadata("id", 1, 1000, 0)
				m.State = from
				tr := m.base(to, 1)
				if got := m.begin(tr); got != want {
					t.Fatalf("begin = %v, want %v", got, want)
				}
				if want {
					m.apply()
					if m.State != to || m.pending != nil {
						t.Fatalf("after apply: state %v pending %v", m.State, m.pending)
					}
				} else if m.State != from || m.pending != nil {
					t.Fatal("a refused transition changed the metadata")
				}
			})
		}
	}
}

func TestStateNames(t *testing.T) {
	for _, s := range AllStates() {
		back, ok := ParseState(s.String())
		if !ok || back != s {
			t.Fatalf("%v does not round-trip", s)
		}
	}
	if _, ok := ParseState("Bogus"); ok {
		t.Fatal("parsed a bogus state")
	}
}

// A pending transition blocks another until it is applied or abandoned.
func TestPendingTransitionBlocks(t *testing.T) {
	m := newMetadata("id", 1, 1000, 0)
	if !m.begin(m.base(Ongoing, 1)) {
		t.Fatal("first begin refused")
	}
	if m.begin(m.base(Ongoing, 2)) {
		t.Fatal("second begin allowed while the first is in flight")
	}
	ch := m.waiters
	m.finish()
	select {
	case <-ch:
	default:
		t.Fatal("waiters not woken when the transition was abandoned")
	}
	if m.State != Empty {
		t.Fatal("an abandoned transition changed the state")
	}
}

func TestLogRecordRoundTrip(t *testing.T) {
	m := newMetadata("order-writer", 42, 60000, 10)
	tr := m.base(Ongoing, 20)
	tr.epoch, tr.startTimeMs = 3, 15
	tr.partitions[TopicPartition{"orders", 2}] = true
	tr.partitions[TopicPartition{"orders", 0}] = true
	tr.partitions[TopicPartition{"audit", 1}] = true
	v, err := EncodeValue(tr.value())
	if err != nil {
		t.Fatal(err)
	}
	dv, err := DecodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	back := fromValue("order-writer", dv)
	if back.ProducerID != 42 || back.ProducerEpoch != 3 || back.State != Ongoing || len(back.Partitions) != 3 || !back.Partitions[TopicPartition{"audit", 1}] || back.StartTimeMs != 15 {
		t.Fatalf("round trip: %+v", back)
	}
	id, err := DecodeKey(EncodeKey("order-writer"))
	if err != nil || id != "order-writer" {
		t.Fatalf("key round trip: %q %v", id, err)
	}
	if _, err := DecodeKey([]byte{0, 0, 0, 9, 'x'}); err == nil {
		t.Fatal("a short key decoded")
	}
	js := DecodeJSON(EncodeKey("order-writer"), v)
	for _, want := range []string{`"transactionalId":"order-writer"`, `"producerId":42`, `"transactionStatus":1`, `{"topic":"audit","partitionIds":[1]}`, `{"topic":"orders","partitionIds":[0,2]}`} {
		if !contains(js, want) {
			t.Fatalf("decoder output %s lacks %s", js, want)
		}
	}
	if got := DecodeJSON(EncodeKey("x"), nil); !contains(got, "<DELETE>") {
		t.Fatalf("tombstone: %s", got)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
