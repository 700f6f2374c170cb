package group

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// simClient is a well-behaved consumer of the consumer protocol: it takes
// the partitions the coordinator gives it at once, gives up those it is
// told to revoke a few heartbeats later (as a client committing first
// does), reports what it owns, and starts over on FENCED_MEMBER_EPOCH or
// UNKNOWN_MEMBER_ID.
type simClient struct {
	id        string
	instance  string
	regex     string
	names     []string
	epoch     int32
	joined    bool
	owned     assignment // including what it is still releasing
	releasing assignment
	waited    int  // heartbeats since it began releasing
	reported  bool // owned was reported since it last changed
}

type simRun struct {
	t       *testing.T
	h       *cgHarness
	rng     *rand.Rand
	clients map[string]*simClient // alive
	zombies map[string]*simClient // crashed: never heard from again
	next    int
	topics  map[string]int
	log     []string
}

func (r *simRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
	if len(r.log) > 40 {
		r.log = r.log[1:]
	}
}

func (r *simRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nlast steps:\n  %s", fmt.Sprintf(format, args...), joinLines(r.log))
}

func joinLines(s []string) string {
	out := ""
	for i, l := range s {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}

// beat sends c's heartbeat (a join when it is not in the group) and
// applies the answer as a client would.
func (r *simRun) beat(c *simClient) {
	if len(c.releasing) > 0 {
		if c.waited++; c.waited > 3 || r.rng.Intn(2) == 0 {
			c.owned = minus(c.owned, c.releasing)
			r.logf("%s released %v", c.id, c.releasing)
			c.releasing, c.waited, c.reported = assignment{}, 0, false
		}
	}
	req := &pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: c.id, MemberEpoch: c.epoch, RebalanceTimeoutMs: -1, ClientId: "sim", Version: 1}
	if c.instance != "" {
		req.InstanceId = &c.instance
	}
	full := !c.joined || !c.reported || r.rng.Intn(4) == 0
	if !c.joined {
		req.MemberEpoch = 0
		c.owned, c.releasing = assignment{}, assignment{}
	}
	if full {
		req.RebalanceTimeoutMs = 30_000
		req.TopicPartitions = &pb.OwnedPartitions{Topics: c.owned.pb()}
		if c.regex != "" {
			req.SubscribedTopicRegex = &c.regex
		} else {
			req.SubscribedTopicNames = subNames(c.names...)
		}
	}
	resp, err := r.h.c.ConsumerGroupHeartbeat(context.Background(), req, nil)
	if err != nil {
		r.fatalf("heartbeat of %s: %v", c.id, err)
	}
	switch resp.ErrorCode {
	case pb.ErrorCode_NONE:
	case pb.ErrorCode_FENCED_MEMBER_EPOCH, pb.ErrorCode_UNKNOWN_MEMBER_ID:
		r.logf("%s told %v: starts over", c.id, resp.ErrorCode)
		c.joined, c.owned, c.releasing, c.epoch = false, assignment{}, assignment{}, 0
		if resp.ErrorCode == pb.ErrorCode_UNKNOWN_MEMBER_ID && c.instance == "" {
			r.rename(c)
		}
		return
	case pb.ErrorCode_UNRELEASED_INSTANCE_ID:
		return // the previous incarnation still holds the instance id
	default:
		r.fatalf("heartbeat of %s (epoch %d): %v %s", c.id, c.epoch, resp.ErrorCode, resp.ErrorMessage)
	}
	if full {
		c.reported = true
	}
	c.joined, c.epoch = true, resp.MemberEpoch
	if resp.Assignment != nil {
		next := assignmentFromPB(resp.Assignment.Topics)
		held := minus(c.owned, c.releasing)
		if !next.equal(held) {
			revoke := minus(held, next)
			r.logf("%s epoch %d is given %v (held %v, releasing %v)", c.id, c.epoch, next, held, revoke)
			c.releasing = union(c.releasing, revoke)
			c.owned, c.reported = union(next, c.releasing), false
		}
	}
}

func minus(a, b assignment) assignment {
	out := assignment{}
	for t, ps := range a {
		for _, p := range ps {
			if !b.has(t, p) {
				out[t] = append(out[t], p)
			}
		}
	}
	return out.normalized()
}

func union(a, b assignment) assignment {
	out := a.clone()
	if out == nil {
		out = assignment{}
	}
	for t, ps := range b {
		out[t] = append(out[t], ps...)
	}
	return out.normalized()
}

// rename gives a dynamic client a new member id (as franz-go does after
// UNKNOWN_MEMBER_ID).
func (r *simRun) rename(c *simClient) {
	delete(r.clients, c.id)
	r.next++
	c.id = fmt.Sprintf("c%d", r.next)
	r.clients[c.id] = c
}

// check asserts the invariants: the coordinator never has a partition in
// two members' assigned or revoking sets, its partition epochs are its
// members', and no two live clients own a partition at once.
func (r *simRun) check() {
	r.t.Helper()
	r.h.cgroup("g", func(cg *consumerGroup) {
		if cg == nil {
			return
		}
		held := map[string]string{}
		want := map[string]map[int32]int32{}
		for id, m := range cg.members {
			for _, a := range []assignment{m.assigned, m.revoking} {
				for t, ps := range a {
					for _, p := range ps {
						k := fmt.Sprintf("%s-%d", t, p)
						if o, dup := held[k]; dup {
							r.fatalf("the coordinator has %s in both %s and %s", k, o, id)
						}
						held[k] = id
						if want[t] == nil {
							want[t] = map[int32]int32{}
						}
						want[t][p] = m.epoch
					}
				}
			}
		}
		if fmt.Sprint(want) != fmt.Sprint(cg.partEpochs) {
			r.fatalf("partition epochs %v, the members say %v", cg.partEpochs, want)
		}
	})
	owner := map[string]string{}
	for _, c := range r.clients {
		for t, ps := range c.owned {
			for _, p := range ps {
				k := fmt.Sprintf("%s-%d", t, p)
				if o, dup := owner[k]; dup {
					r.fatalf("clients %s and %s both own %s", o, c.id, k)
				}
				owner[k] = c.id
			}
		}
	}
}

func (r *simRun) aliveIDs() []string {
	var ids []string
	for id := range r.clients {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (r *simRun) pick() *simClient {
	ids := r.aliveIDs()
	if len(ids) == 0 {
		return nil
	}
	return r.clients[ids[r.rng.Intn(len(ids))]]
}

// beatAll heartbeats every live client.
func (r *simRun) beatAll() {
	for _, id := range r.aliveIDs() {
		if c := r.clients[id]; c != nil {
			r.beat(c)
			r.check()
		}
	}
}

func (r *simRun) newClient() {
	r.next++
	c := &simClient{id: fmt.Sprintf("c%d", r.next), owned: assignment{}}
	switch r.rng.Intn(3) {
	case 0:
		c.regex = "r-.*"
	case 1:
		c.names = []string{"t"}
	default:
		c.names = []string{"t", "u"}
	}
	if r.rng.Intn(4) == 0 {
		c.instance = fmt.Sprintf("pod-%d", r.next)
	}
	r.clients[c.id] = c
	r.logf("%s joins (names %v, regex %q, instance %q)", c.id, c.names, c.regex, c.instance)
	r.beat(c)
}

func (r *simRun) step() {
	switch n := r.rng.Intn(100); {
	case n < 8 && len(r.clients) < 8:
		r.newClient()
	case n < 12:
		if c := r.pick(); c != nil {
			r.logf("%s leaves", c.id)
			resp := r.h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: c.id, MemberEpoch: -1})
			if resp.ErrorCode != pb.ErrorCode_NONE && resp.ErrorCode != pb.ErrorCode_UNKNOWN_MEMBER_ID {
				r.fatalf("leave of %s: %v", c.id, resp)
			}
			delete(r.clients, c.id)
		}
	case n < 15:
		if c := r.pick(); c != nil {
			r.logf("%s crashes", c.id)
			delete(r.clients, c.id)
			r.zombies[c.id] = c
		}
	case n < 18:
		// Ten seconds pass, the live clients heartbeating.
		for i := 0; i < 5; i++ {
			r.h.sweepNow(2 * time.Second)
			r.beatAll()
		}
	case n < 21:
		r.changeTopics()
	case n < 23:
		r.logf("failover")
		r.h = r.h.failover()
	case n < 25:
		if c := r.pick(); c != nil && c.instance != "" && c.joined {
			// A static member restarts: it leaves for now, and a new
			// incarnation with a new member id takes its place.
			r.logf("%s (instance %s) restarts", c.id, c.instance)
			resp := r.h.hb(&pb.ConsumerGroupHeartbeatRequest{GroupId: "g", MemberId: c.id, MemberEpoch: -2, InstanceId: &c.instance})
			if resp.ErrorCode != pb.ErrorCode_NONE {
				r.fatalf("static leave of %s: %v", c.id, resp)
			}
			c.joined, c.owned, c.releasing, c.epoch = false, assignment{}, assignment{}, 0
			r.rename(c)
			r.beat(c)
		}
	default:
		if c := r.pick(); c != nil {
			r.beat(c)
		}
	}
	r.check()
}

func (r *simRun) changeTopics() {
	switch r.rng.Intn(3) {
	case 0:
		r.topics["t"] += 1 + r.rng.Intn(2)
	case 1:
		r.topics[fmt.Sprintf("r-%d", r.rng.Intn(4))] = 1 + r.rng.Intn(3)
	default:
		if _, ok := r.topics["u"]; ok {
			delete(r.topics, "u")
		} else {
			r.topics["u"] = 2
		}
	}
	r.logf("topics now %v", r.topics)
	r.h.img.setTopics(r.topics)
}

// settle stops the churn and heartbeats until the group is stable; then
// every partition the live clients subscribe to is owned by exactly one.
func (r *simRun) settle() {
	r.t.Helper()
	for i := 0; i < 30; i++ {
		r.h.sweepNow(2 * time.Second)
		r.beatAll()
	}
	// Refresh regular expressions, then settle again.
	r.h.clk.Advance(11 * time.Second)
	for round := 0; round < 60; round++ {
		r.beatAll()
		var st string
		r.h.cgroup("g", func(cg *consumerGroup) {
			if cg != nil {
				st = cg.state()
			}
		})
		if st == cgStable || st == cgEmpty {
			break
		}
		r.h.sweepNow(time.Second)
	}
	for i := 0; i < 5; i++ {
		r.beatAll()
	}
	var st string
	r.h.cgroup("g", func(cg *consumerGroup) {
		if cg != nil {
			st = cg.state()
		}
	})
	if len(r.clients) > 0 && st != cgStable {
		r.fatalf("the group did not settle: %s", st)
	}
	im := r.h.img.get()
	want := map[string]bool{}
	for _, c := range r.clients {
		for name, t := range im.Topics {
			sub := false
			for _, n := range c.names {
				sub = sub || n == name
			}
			if c.regex != "" && len(name) > 2 && name[:2] == "r-" {
				sub = true
			}
			if sub {
				for p := range t.Partitions {
					want[fmt.Sprintf("%s-%d", t.ID, p)] = true
				}
			}
		}
	}
	got := map[string]bool{}
	for _, c := range r.clients {
		for t, ps := range c.owned {
			for _, p := range ps {
				got[fmt.Sprintf("%s-%d", t, p)] = true
			}
		}
	}
	if fmt.Sprint(want) != fmt.Sprint(got) {
		r.fatalf("settled with the clients owning %v, want %v", got, want)
	}
}

// TestConsumerGroupRandomizedOwnership: over random runs of joins,
// leaves, crashes, static restarts, topic changes and coordinator
// failovers, no partition is ever owned by two live members at once (nor
// held twice by the coordinator), and once the churn stops every
// subscribed partition has exactly one owner.
func TestConsumerGroupRandomizedOwnership(t *testing.T) {
	seeds := 12
	if testing.Short() {
		seeds = 3
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			h := newCGHarness(t)
			r := &simRun{t: t, h: h, rng: rand.New(rand.NewSource(int64(seed))), clients: map[string]*simClient{}, zombies: map[string]*simClient{},
				topics: map[string]int{"t": 4, "u": 2, "r-0": 2}}
			h.img.setTopics(r.topics)
			for i := 0; i < 3; i++ {
				r.newClient()
			}
			for i := 0; i < 400; i++ {
				r.step()
			}
			r.settle()
		})
	}
}
