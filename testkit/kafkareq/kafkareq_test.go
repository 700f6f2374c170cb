package kafkareq

import "testing"

// Every case has its own name and builds a request, anew each time.
func TestRefusals(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Refusals(Names{Topic: "a", NewTopic: "b", Group: "g", TxnID: "tx"}) {
		if seen[c.Name] {
			t.Errorf("two cases named %s", c.Name)
		}
		seen[c.Name] = true
		if r1, r2 := c.Build(), c.Build(); r1 == nil || r1 == r2 {
			t.Errorf("%s: built %p and %p", c.Name, r1, r2)
		}
	}
}
