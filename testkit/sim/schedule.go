package sim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Kind is one kind of fault the simulator injects.
type Kind string

// The faults. Each has a start (At) and, except Elect and Reassign, an
// end Dur later, when it is undone (Handover's end is its second move).
const (
	// Kill stops a node as kill -9 does (no controlled shutdown; with a
	// simulated disk, what it had not fsynced is lost) and starts it again
	// Dur later.
	Kill Kind = "kill"
	// PowerLoss stops a node as a machine losing power does: killed, and
	// its disk loses every write it had not fsynced, the last one
	// possibly torn; it starts again Dur later. The simulator skips one
	// that would strike while another node is down: under Kafka's default
	// flush policy (the page cache, not fsync, holds a batch when it is
	// acknowledged) two replicas losing power together may lose
	// acknowledged records by design, which is no bug to find.
	PowerLoss Kind = "power-loss"
	// Stop stops a node gracefully (controlled shutdown) and starts it
	// again Dur later.
	Stop Kind = "stop"
	// Isolate cuts a node off from every node and client, gossip included,
	// and closes its connections, for Dur.
	Isolate Kind = "isolate"
	// Pause freezes a node's every connection for Dur, as a stopped
	// process (docker pause, SIGSTOP) or a stalled VM does: nothing is
	// closed or refused, but nothing it sends or is sent arrives until the
	// pause ends, when every request and answer held arrives at once, in
	// order, late (a stale leader's answers, a heartbeat sent before a
	// controlled shutdown). Its gossip is cut meanwhile.
	Pause Kind = "pause"
	// Cut breaks the link between Node and Peer (both directions), for Dur.
	Cut Kind = "cut"
	// CutController cuts Node off from whichever node is the active
	// controller when the fault starts (Raft, heartbeats and replication
	// between the two), for Dur: a node that can reach its peers but not
	// the controller.
	CutController Kind = "cut-controller"
	// Slow delays every write on every link of Node by Lat, for Dur: a
	// node whose goroutines are starved or whose network is congested
	// (messages across its connections arrive late, and reorder against
	// other links').
	Slow Kind = "slow"
	// Delay delays every write on the link Node–Peer by Lat, for Dur.
	Delay Kind = "delay"
	// FsyncFail makes the next fsync of Node's disk fail (EIO): its
	// storage fails, and the node stops as strand server stops it (a
	// controlled shutdown), to start again Dur later.
	FsyncFail Kind = "fsync-fail"
	// Elect asks the controller for a preferred leader election of every
	// partition (leaders move back to their first replica mid-run).
	Elect Kind = "elect"
	// Reassign moves one partition of the workload's topics to a rotated
	// replica order (the controller changes its leader and epoch mid-run).
	Reassign Kind = "reassign"
	// Handover moves one partition's leadership twice in quick
	// succession: at its start to the replica after the leader (the
	// replicas reordered so that one is preferred, then a preferred
	// election), and Dur (20 to 400 ms) later on to the third replica.
	// The third replica learns it follows the second and asks it where
	// its log diverges (OffsetForLeaderEpoch) just before it is promoted
	// itself: the answer, for the role it no longer has, arrives while it
	// leads (the handover mix holds many such answers).
	Handover Kind = "handover"
)

// weight is how often a kind is drawn.
type weight struct {
	k Kind
	w int
}

// kinds are drawn with these weights by default.
var kinds = []weight{
	{Kill, 4}, {PowerLoss, 3}, {Stop, 2}, {Isolate, 3}, {Cut, 3}, {CutController, 2}, {Slow, 2}, {Delay, 2}, {Elect, 1}, {Reassign, 1},
	{FsyncFail, 1},
}

// No disk stalls: testkit/simdisk can hold a disk's writes (FS.Stall), but
// a partition log holds its sync.RWMutex across a write, and a goroutine
// waiting on a sync.RWMutex is not durably blocked, so the bubble's clock
// would stand still for the length of the stall. Stalls need the storage
// locks to wait on channels first.

// Profiles are other mixes of faults, for hunting bugs of one area (a
// Scenario's Profile):
//
//   - leadership: leaders move often (preferred elections, reassignments,
//     graceful stops, kills) while nodes and links are slow, so a replica
//     is promoted while its fetcher still waits on a slow old leader, and
//     a leader's role changes under appends in flight.
//   - stale: nodes pause while leaders move and nodes stop, so requests
//     and answers of an old role arrive after the change (a follower's
//     fetch answered by a leader that no longer leads, a heartbeat that
//     reaches the controller after the broker's controlled shutdown).
//   - handover: leadership moves twice in quick succession (Handover)
//     while half the answers to OffsetForLeaderEpoch are held 0.2 to
//     1.2 s, so a replica's fetcher acts on an answer meant for the
//     follower it was before its promotion.
//   - markers: links between replicas are slow while a third of the
//     answers to WriteTxnMarkers are lost after the leader appended the
//     markers, so the coordinator sends them again while the followers
//     do not have them yet.
//
// A profile's mix is never changed once seeds of it are kept in
// testdata/seeds (a seed's schedule is drawn from it): add a profile
// instead.
var Profiles = map[string][]weight{
	"leadership": {{Kill, 2}, {Stop, 3}, {Slow, 4}, {Delay, 3}, {Elect, 4}, {Reassign, 3}, {CutController, 1}},
	"stale":      {{Pause, 5}, {Elect, 4}, {Stop, 3}, {Reassign, 2}, {Kill, 1}, {Slow, 1}},
	"handover":   {{Handover, 8}, {Delay, 2}, {Kill, 1}, {Stop, 1}},
	"markers":    {{Delay, 6}, {Slow, 2}, {Kill, 2}, {Stop, 1}, {Elect, 1}},
}

// Fault is one scheduled fault.
type Fault struct {
	At   time.Duration // virtual time from the start of the workload
	Kind Kind
	Node int32
	Peer int32         // Cut, Delay
	Dur  time.Duration // how long it lasts
	Lat  time.Duration // Slow, Delay
	Pick int           // Reassign, Handover: which partition (an index the run maps onto its partitions)
}

func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6.2fs %s", f.At.Seconds(), f.Kind)
	switch f.Kind {
	case Cut, Delay:
		fmt.Fprintf(&b, " %d-%d", f.Node, f.Peer)
	case Elect:
	case Reassign:
		fmt.Fprintf(&b, " partition#%d", f.Pick)
	case Handover:
		fmt.Fprintf(&b, " partition#%d, again", f.Pick)
	default:
		fmt.Fprintf(&b, " node %d", f.Node)
	}
	if f.Lat > 0 {
		fmt.Fprintf(&b, " +%s", f.Lat)
	}
	if f.Dur > 0 {
		fmt.Fprintf(&b, " for %s", f.Dur)
	}
	return b.String()
}

// Schedule is the fault schedule a seed gives a scenario: every fault
// starts after a warm-up and ends before the workload's time is up. The
// same seed and scenario always give the same schedule.
func Schedule(seed uint64, sc Scenario) []Fault {
	sc.defaults()
	rng := rand.New(rand.NewPCG(seed, 0x5c4ed01e))
	mix := kinds
	if p, ok := Profiles[sc.Profile]; ok {
		mix = p
	}
	total := 0
	for _, k := range mix {
		total += k.w
	}
	warm := 3 * time.Second
	window := sc.Duration - warm - time.Second
	if window <= 0 {
		return nil
	}
	n := sc.Faults
	if n < 0 {
		n = 0
	}
	var out []Fault
	for range n {
		x := rng.IntN(total)
		var k Kind
		for _, c := range mix {
			if x < c.w {
				k = c.k
				break
			}
			x -= c.w
		}
		f := Fault{Kind: k, At: warm + time.Duration(rng.Int64N(int64(window)))}
		f.At = f.At.Truncate(10 * time.Millisecond)
		f.Node = int32(1 + rng.IntN(sc.Nodes))
		f.Peer = int32(1 + rng.IntN(sc.Nodes-1))
		if f.Peer >= f.Node {
			f.Peer++
		}
		// Durations from 0.2 s to 6 s: some shorter than a session
		// timeout (2 s), some past it (the controller fences the node).
		f.Dur = time.Duration(200+rng.IntN(5800)) * time.Millisecond
		switch k {
		case Slow, Delay:
			f.Lat = time.Duration(5+rng.IntN(400)) * time.Millisecond
		case Elect:
			f.Dur = 0
		case Reassign:
			f.Dur = 0
			f.Pick = rng.IntN(1 << 16)
		case Handover:
			f.Dur = time.Duration(20+rng.IntN(380)) * time.Millisecond
			f.Pick = rng.IntN(1 << 16)
		}
		if end := warm + window; f.At+f.Dur > end {
			f.Dur = end - f.At
		}
		f.Dur = f.Dur.Truncate(10 * time.Millisecond)
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out
}
