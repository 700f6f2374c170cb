package main

import "testing"

// TestSplitUserKeys: kafka-configs' users entity takes SCRAM keys and
// quota keys in one list; the commas inside a SCRAM key's [...] do not
// split it.
func TestSplitUserKeys(t *testing.T) {
	for _, c := range []struct{ in, scram, other string }{
		{"SCRAM-SHA-256=[iterations=8192,password=a,b],producer_byte_rate=1024", "SCRAM-SHA-256=[iterations=8192,password=a,b]", "producer_byte_rate=1024"},
		{"producer_byte_rate=1,consumer_byte_rate=2", "", "producer_byte_rate=1,consumer_byte_rate=2"},
		{"SCRAM-SHA-512, producer_byte_rate", "SCRAM-SHA-512", "producer_byte_rate"},
		{"", "", ""},
	} {
		s, o := splitUserKeys(c.in)
		if s != c.scram || o != c.other {
			t.Errorf("splitUserKeys(%q) = %q, %q; want %q, %q", c.in, s, o, c.scram, c.other)
		}
	}
}
