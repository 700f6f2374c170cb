package console

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/strand-io/strand/metadata"
)

type brokerRow struct {
	ID                                  int32
	Address, InterBroker, Kafka, Rack   string
	Fenced, Voter, ActiveController, Me bool
}

type voterRow struct {
	ID     int32
	Addr   string
	Active bool
}

type clusterData struct {
	ClusterID        string
	MetadataOffset   int64
	ActiveController int32
	Brokers          []brokerRow
	Fenced           []int32
	Voters           []voterRow
}

func (c *Console) clusterPage(w http.ResponseWriter, r *http.Request) {
	im := c.image()
	active := c.cfg.ActiveController()
	d := clusterData{ClusterID: im.ClusterID, MetadataOffset: im.Offset, ActiveController: active}
	voter := map[int32]bool{}
	for _, v := range c.voters() {
		voter[v.ID] = true
		d.Voters = append(d.Voters, voterRow{ID: v.ID, Addr: v.Addr, Active: v.ID == active})
	}
	for _, b := range im.Brokers {
		d.Brokers = append(d.Brokers, brokerRow{ID: b.ID, Address: b.Address, InterBroker: b.InterBrokerAddress, Kafka: b.KafkaAddress, Rack: b.Rack,
			Fenced: b.Fenced, Voter: voter[b.ID], ActiveController: b.ID == active, Me: b.ID == c.cfg.NodeID})
		if b.Fenced {
			d.Fenced = append(d.Fenced, b.ID)
		}
	}
	sort.Slice(d.Brokers, func(i, j int) bool { return d.Brokers[i].ID < d.Brokers[j].ID })
	slices.Sort(d.Fenced)
	c.render(w, r, http.StatusOK, "cluster", "cluster", nil, d)
}

type topicRow struct {
	Name                                             string
	Internal                                         bool
	Partitions, RF, UnderReplicated, Offline, Moving int
}

func (c *Console) topicsPage(w http.ResponseWriter, r *http.Request) {
	im := c.image()
	var rows []topicRow
	for _, t := range im.Topics {
		row := topicRow{Name: t.Name, Internal: t.Internal, Partitions: len(t.Partitions)}
		for _, p := range t.Partitions {
			row.RF = max(row.RF, len(p.Replicas)-len(p.AddingReplicas))
			if len(p.ISR) < len(p.Replicas) {
				row.UnderReplicated++
			}
			if p.Leader < 0 {
				row.Offline++
			}
			if len(p.AddingReplicas)+len(p.RemovingReplicas) > 0 {
				row.Moving++
			}
		}
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	rows, sh := capped(rows)
	c.render(w, r, http.StatusOK, "topics", "topics", nil, topicsData{Rows: rows, shown: sh})
}

type topicsData struct {
	Rows []topicRow
	shown
}

type partRow struct {
	Topic                           string
	Partition, Leader, LeaderEpoch  int32
	Replicas, ISR, Adding, Removing []int32
	HW, LSO, LSOLag                 int64
	OpenTxns, Hanging               int
	OldestTxnAge                    time.Duration // -1: none or unknown
	OldestTxnUnknown                bool          // open, but no coordinator says since when
	Err                             string
}

type topicData struct {
	Name     string
	ID       string
	Internal bool
	Rows     []partRow
	shown    // of the topic's partitions
}

func (c *Console) topicPage(w http.ResponseWriter, r *http.Request) {
	im := c.image()
	name := r.PathValue("topic")
	t := im.Topic(name)
	if t == nil {
		c.notFound(w, r, "topic "+name)
		return
	}
	d, problems, err := c.gather(r, im, "topic\x00"+name, func(ctx context.Context) (any, []string) { return c.topicData(ctx, im, t) })
	if err != nil {
		c.gatherFailed(w, err)
		return
	}
	c.render(w, r, http.StatusOK, "topic", "topic "+t.Name, problems, d)
}

// topicData gathers a topic page: its first maxRows partitions.
func (c *Console) topicData(ctx context.Context, im *metadata.Image, t *metadata.Topic) (topicData, []string) {
	parts, sh := capped(t.Partitions)
	states, problems := c.partitionStates(ctx, im, parts, true)
	var byPID map[int64]*txn
	listed := false // every coordinator answered: a producer none knows may be hanging
	if anyOpen(states) {
		ts, more := c.transactions(ctx, im)
		problems = append(problems, more...)
		byPID, listed = txnsByPID(ts), len(more) == 0
	}
	d := topicData{Name: t.Name, ID: t.ID, Internal: t.Internal, shown: sh}
	for _, p := range parts {
		s := states[tpKey{p.Topic, p.Partition}]
		row := partRow{Topic: p.Topic, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR,
			Adding: p.AddingReplicas, Removing: p.RemovingReplicas, HW: s.HW, LSO: s.LSO, LSOLag: -1, OldestTxnAge: -1, Err: s.Err}
		if s.HW >= 0 && s.LSO >= 0 {
			row.LSOLag = s.HW - s.LSO
		}
		open := c.openTxns(p.Topic, p.Partition, s, byPID, listed)
		row.OpenTxns = len(open)
		for _, o := range open {
			if o.Hanging != "" {
				row.Hanging++
			}
			if o.Age < 0 {
				row.OldestTxnUnknown = true
			} else if o.Age > row.OldestTxnAge {
				row.OldestTxnAge = o.Age
			}
		}
		d.Rows = append(d.Rows, row)
	}
	return d, problems
}

type partitionData struct {
	Row         partRow
	Holders     []*openTxn
	Others      []*openTxn
	OthersShown shown
}

// partitionPage is "who holds the LSO": the producers whose open
// transaction starts at the partition's LSO, then its other open ones.
func (c *Console) partitionPage(w http.ResponseWriter, r *http.Request) {
	im := c.image()
	name := r.PathValue("topic")
	n, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	var p *metadata.Partition
	if err == nil {
		p = im.Partition(name, int32(n))
	}
	if p == nil {
		c.notFound(w, r, "partition "+name+"-"+r.PathValue("partition"))
		return
	}
	title := "who holds the LSO of " + p.Topic + "-" + strconv.Itoa(int(p.Partition))
	d, problems, err := c.gather(r, im, "partition\x00"+p.Topic+"\x00"+strconv.Itoa(int(p.Partition)),
		func(ctx context.Context) (any, []string) { return c.partitionData(ctx, im, p) })
	if err != nil {
		c.gatherFailed(w, err)
		return
	}
	c.render(w, r, http.StatusOK, "partition", title, problems, d)
}

func (c *Console) partitionData(ctx context.Context, im *metadata.Image, p *metadata.Partition) (partitionData, []string) {
	states, problems := c.partitionStates(ctx, im, []*metadata.Partition{p}, true)
	s := states[tpKey{p.Topic, p.Partition}]
	var byPID map[int64]*txn
	listed := false // every coordinator answered: a producer none knows may be hanging
	if anyOpen(states) {
		ts, more := c.transactions(ctx, im)
		problems = append(problems, more...)
		byPID, listed = txnsByPID(ts), len(more) == 0
	}
	d := partitionData{Row: partRow{Topic: p.Topic, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas, ISR: p.ISR,
		Adding: p.AddingReplicas, Removing: p.RemovingReplicas, HW: s.HW, LSO: s.LSO, LSOLag: -1, OldestTxnAge: -1, Err: s.Err}}
	if s.HW >= 0 && s.LSO >= 0 {
		d.Row.LSOLag = s.HW - s.LSO
	}
	for _, o := range c.openTxns(p.Topic, p.Partition, s, byPID, listed) {
		if o.HoldsLSO {
			d.Holders = append(d.Holders, o)
		} else {
			d.Others = append(d.Others, o)
		}
	}
	d.Others, d.OthersShown = capped(d.Others)
	return d, problems
}

type groupsData struct {
	Groups []*groupDetail
	shown
}

// groupsPage lists the groups; only the first maxRows (by id) are
// described, so a cluster with thousands of groups costs the page
// maxRows OffsetFetch calls, not thousands.
func (c *Console) groupsPage(w http.ResponseWriter, r *http.Request) {
	im := c.image()
	d, problems, err := c.gather(r, im, "groups", func(ctx context.Context) (any, []string) {
		gs, problems := c.groups(ctx, im)
		gs, sh := capped(gs)
		ds, more := c.describeGroups(ctx, im, gs)
		return groupsData{Groups: ds, shown: sh}, append(problems, more...)
	})
	if err != nil {
		c.gatherFailed(w, err)
		return
	}
	c.render(w, r, http.StatusOK, "groups", "groups", problems, d)
}

func (c *Console) groupPage(w http.ResponseWriter, r *http.Request) {
	im := c.image()
	id := r.PathValue("group")
	v, problems, err := c.gather(r, im, "group\x00"+id, func(ctx context.Context) (any, []string) {
		gs, problems := c.groups(ctx, im)
		var g *listedGroup
		for _, x := range gs {
			if x.ID == id {
				g = x
			}
		}
		if g == nil {
			return (*groupDetail)(nil), problems
		}
		ds, more := c.describeGroups(ctx, im, []*listedGroup{g})
		problems = append(problems, more...)
		var d *groupDetail
		if len(ds) == 1 {
			d = ds[0]
			d.Members, d.MembersShown = capped(d.Members)
			d.Offsets, d.OffsetsShown = capped(d.Offsets)
		}
		return d, problems
	})
	if err != nil {
		c.gatherFailed(w, err)
		return
	}
	d := v.(*groupDetail)
	if d == nil {
		if len(problems) > 0 {
			// Perhaps on the broker that did not answer: say so rather than 404.
			c.render(w, r, http.StatusServiceUnavailable, "group", "group "+id, problems, d)
			return
		}
		c.notFound(w, r, "group "+id)
		return
	}
	c.render(w, r, http.StatusOK, "group", "group "+id, problems, d)
}

type addingRow struct {
	ID     int32
	InISR  bool
	Leader bool
	// LogEnd and Behind are the leader's view of the replica's log end
	// (-1: unknown here: this node does not lead the partition).
	LogEnd, Behind int64
}

type reassignRow struct {
	Topic                                   string
	Partition, Leader                       int32
	Replicas, Target, ISR, Adding, Removing []int32
	AddingState                             []addingRow
	CaughtUp, ToCatchUp                     int
	HW                                      int64
	LeaderEnd                               int64 // -1: unknown here (this node does not lead it)
	Err                                     string
}

// reassignmentsPage lists the partitions whose metadata has adding or
// removing replicas (KIP-455): the target set is the replicas less the
// removing ones; an adding replica has caught up once it joined the ISR.
func (c *Console) reassignmentsPage(w http.ResponseWriter, r *http.Request) {
	im := c.image()
	var parts []*metadata.Partition
	for _, t := range im.Topics {
		for _, p := range t.Partitions {
			if len(p.AddingReplicas)+len(p.RemovingReplicas) > 0 {
				parts = append(parts, p)
			}
		}
	}
	sort.Slice(parts, func(i, j int) bool {
		a, b := parts[i], parts[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	parts, sh := capped(parts)
	var problems []string
	var states map[tpKey]*partState
	if len(parts) > 0 {
		v, more, err := c.gather(r, im, "reassignments", func(ctx context.Context) (any, []string) {
			return c.partitionStates(ctx, im, parts, false)
		})
		if err != nil {
			c.gatherFailed(w, err)
			return
		}
		states, problems = v.(map[tpKey]*partState), more
	}
	var rows []reassignRow
	for _, p := range parts {
		row := reassignRow{Topic: p.Topic, Partition: p.Partition, Leader: p.Leader, Replicas: p.Replicas, ISR: p.ISR,
			Adding: p.AddingReplicas, Removing: p.RemovingReplicas, HW: -1, LeaderEnd: -1}
		var ends map[int32]int64
		if c.cfg.FollowerLogEnds != nil {
			var ok bool
			if ends, row.LeaderEnd, ok = c.cfg.FollowerLogEnds(p.Topic, p.Partition); !ok {
				ends, row.LeaderEnd = nil, -1
			}
		}
		for _, id := range p.Replicas {
			if !slices.Contains(p.RemovingReplicas, id) {
				row.Target = append(row.Target, id)
			}
		}
		for _, id := range p.AddingReplicas {
			a := addingRow{ID: id, InISR: p.InISR(id), Leader: id == p.Leader, LogEnd: -1, Behind: -1}
			if e, ok := ends[id]; ok && e >= 0 && row.LeaderEnd >= 0 {
				a.LogEnd, a.Behind = e, max(row.LeaderEnd-e, 0)
			}
			if a.InISR {
				row.CaughtUp++
			} else {
				row.ToCatchUp++
			}
			row.AddingState = append(row.AddingState, a)
		}
		if s := states[tpKey{p.Topic, p.Partition}]; s != nil {
			row.HW, row.Err = s.HW, s.Err
		}
		rows = append(rows, row)
	}
	c.render(w, r, http.StatusOK, "reassignments", "reassignments", problems, reassignData{Rows: rows, shown: sh})
}

type reassignData struct {
	Rows []reassignRow
	shown
}

type txnState struct {
	State string
	Txns  []*txn
	Count int // in this state, shown or not
}

type txnsData struct {
	States []txnState
	shown
}

// stateOrder is the order the transactions page lists states in: the
// ones holding something up first.
var stateOrder = []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence", "CompleteCommit", "CompleteAbort", "Empty", "Dead"}

func (c *Console) transactionsPage(w http.ResponseWriter, r *http.Request) {
	im := c.image()
	d, problems, err := c.gather(r, im, "transactions", func(ctx context.Context) (any, []string) {
		ts, problems := c.transactions(ctx, im)
		return txnsByState(ts), problems
	})
	if err != nil {
		c.gatherFailed(w, err)
		return
	}
	c.render(w, r, http.StatusOK, "transactions", "transactions", problems, d)
}

// txnsByState groups transactions by state, in stateOrder, showing at
// most maxRows of them in all.
func txnsByState(ts []*txn) txnsData {
	by := map[string][]*txn{}
	for _, t := range ts {
		by[t.State] = append(by[t.State], t)
	}
	var out []txnState
	for _, s := range stateOrder {
		if len(by[s]) > 0 {
			out = append(out, txnState{State: s, Txns: by[s]})
			delete(by, s)
		}
	}
	var rest []string
	for s := range by {
		rest = append(rest, s)
	}
	sort.Strings(rest)
	for _, s := range rest {
		out = append(out, txnState{State: s, Txns: by[s]})
	}
	d := txnsData{shown: shown{Total: len(ts)}}
	for _, st := range out {
		st.Count = len(st.Txns)
		n := min(st.Count, maxRows-d.Shown)
		if n == 0 {
			break
		}
		st.Txns = st.Txns[:n]
		d.Shown += n
		d.States = append(d.States, st)
	}
	return d
}
