package group

import (
	"testing"
)

// a builds an assignment of topic "t".
func a(ps ...int32) assignment {
	if len(ps) == 0 {
		return assignment{}
	}
	return assignment{"t": ps}.normalized()
}

// TestReconcileTransitions walks every transition of the member
// reconciliation state machine.
func TestReconcileTransitions(t *testing.T) {
	free := func(string, int32) int32 { return -1 }
	heldBy := func(epoch int32, held ...int32) func(string, int32) int32 {
		return func(_ string, p int32) int32 {
			for _, h := range held {
				if h == p {
					return epoch
				}
			}
			return -1
		}
	}
	type want struct {
		state    memberState
		epoch    int32
		prev     int32
		assigned assignment
		revoking assignment
	}
	cases := []struct {
		name        string
		m           cmember
		targetEpoch int32
		target      assignment
		owner       func(string, int32) int32
		owned       assignment
		same        bool // the member comes back unchanged
		want        want
	}{
		{name: "stable at the target epoch: nothing to do",
			m: cmember{state: memberStable, epoch: 3, prevEpoch: 2, assigned: a(0, 1)}, targetEpoch: 3, target: a(0, 1, 2), owner: free, same: true},
		{name: "stable, new target adds free partitions: stable at the target epoch",
			m: cmember{state: memberStable, epoch: 3, prevEpoch: 2, assigned: a(0)}, targetEpoch: 4, target: a(0, 1), owner: free, owned: a(0),
			want: want{memberStable, 4, 3, a(0, 1), a()}},
		{name: "stable, new target adds held partitions: unreleased at the target epoch with what is free",
			m: cmember{state: memberStable, epoch: 3, prevEpoch: 2, assigned: a(0)}, targetEpoch: 4, target: a(0, 1, 2), owner: heldBy(3, 2), owned: a(0),
			want: want{memberUnreleased, 4, 3, a(0, 1), a()}},
		{name: "stable, new target takes partitions it still owns: unrevoked at its epoch",
			m: cmember{state: memberStable, epoch: 3, prevEpoch: 2, assigned: a(0, 1, 2)}, targetEpoch: 4, target: a(0, 3), owner: free, owned: a(0, 1, 2),
			want: want{memberUnrevoked, 3, 2, a(0), a(1, 2)}},
		{name: "stable, new target takes partitions, owned not reported: unrevoked",
			m: cmember{state: memberStable, epoch: 3, prevEpoch: 2, assigned: a(0, 1)}, targetEpoch: 4, target: a(0), owner: free, owned: nil,
			want: want{memberUnrevoked, 3, 2, a(0), a(1)}},
		{name: "stable, new target takes partitions it no longer reports: straight to the target epoch",
			m: cmember{state: memberStable, epoch: 3, prevEpoch: 2, assigned: a(0, 1)}, targetEpoch: 4, target: a(0, 2), owner: free, owned: a(0),
			want: want{memberStable, 4, 3, a(0, 2), a()}},
		{name: "unrevoked, still reporting a partition to revoke: unchanged",
			m: cmember{state: memberUnrevoked, epoch: 3, prevEpoch: 2, assigned: a(0), revoking: a(1, 2)}, targetEpoch: 4, target: a(0, 3), owner: free, owned: a(0, 2), same: true},
		{name: "unrevoked, owned not reported: unchanged",
			m: cmember{state: memberUnrevoked, epoch: 3, prevEpoch: 2, assigned: a(0), revoking: a(1)}, targetEpoch: 4, target: a(0), owner: free, owned: nil, same: true},
		{name: "unrevoked, revoked: the target epoch with the free partitions",
			m: cmember{state: memberUnrevoked, epoch: 3, prevEpoch: 2, assigned: a(0), revoking: a(1, 2)}, targetEpoch: 4, target: a(0, 3), owner: free, owned: a(0),
			want: want{memberStable, 4, 3, a(0, 3), a()}},
		{name: "unrevoked, revoked, the target moved on and takes more: unrevoked again one epoch on",
			m: cmember{state: memberUnrevoked, epoch: 3, prevEpoch: 2, assigned: a(0, 4), revoking: a(1)}, targetEpoch: 6, target: a(0), owner: free, owned: a(0, 4),
			want: want{memberUnrevoked, 4, 3, a(0), a(4)}},
		{name: "unreleased, the partitions are free now: stable",
			m: cmember{state: memberUnreleased, epoch: 4, prevEpoch: 3, assigned: a(0)}, targetEpoch: 4, target: a(0, 1), owner: free, owned: a(0),
			want: want{memberStable, 4, 3, a(0, 1), a()}},
		{name: "unreleased, still held: unchanged state",
			m: cmember{state: memberUnreleased, epoch: 4, prevEpoch: 3, assigned: a(0)}, targetEpoch: 4, target: a(0, 1), owner: heldBy(3, 1), owned: a(0),
			want: want{memberUnreleased, 4, 3, a(0), a()}},
		{name: "a new member joins with nothing: the target epoch",
			m: cmember{state: memberStable, epoch: 0, prevEpoch: -1, assigned: a()}, targetEpoch: 1, target: a(0, 1), owner: free, owned: a(),
			want: want{memberStable, 1, 0, a(0, 1), a()}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			if m.revoking == nil {
				m.revoking = assignment{}
			}
			got := reconcile(&m, tc.targetEpoch, tc.target, tc.owner, tc.owned)
			if tc.same {
				if got != &m {
					t.Fatalf("member changed to %+v, want it unchanged", got)
				}
				return
			}
			w := tc.want
			if got.state != w.state || got.epoch != w.epoch || got.prevEpoch != w.prev || !got.assigned.equal(w.assigned) || !got.revoking.equal(w.revoking) {
				t.Fatalf("got state %v epoch %d prev %d assigned %v revoking %v\nwant state %v epoch %d prev %d assigned %v revoking %v",
					got.state, got.epoch, got.prevEpoch, got.assigned, got.revoking, w.state, w.epoch, w.prev, w.assigned, w.revoking)
			}
			if m.state != tc.m.state || m.epoch != tc.m.epoch {
				t.Fatal("reconcile modified the member it was given")
			}
		})
	}
}

// TestCheckMemberEpoch: a heartbeat's epoch is the member's, its previous
// one with a subset of its partitions (a lost answer), or 0 (a rejoin);
// anything else is fenced.
func TestCheckMemberEpoch(t *testing.T) {
	m := &cmember{epoch: 5, prevEpoch: 4, assigned: a(0, 1)}
	for _, tc := range []struct {
		epoch int32
		owned assignment
		ok    bool
	}{
		{5, nil, true}, {0, a(), true}, {6, a(0), false}, {4, a(0), true}, {4, a(0, 1), true},
		{4, a(0, 2), false}, {4, nil, false}, {3, a(0), false},
	} {
		err := checkMemberEpoch(m, tc.epoch, tc.owned)
		if (err == nil) != tc.ok {
			t.Errorf("epoch %d owning %v: %v, want ok=%v", tc.epoch, tc.owned, err, tc.ok)
		}
	}
}
