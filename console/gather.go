package console

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// What the pages gather from the brokers. Every call runs under the
// page's context; the per-broker calls of one step run in parallel, each
// in a goroutine the step waits for, so a broker that does not answer
// costs the page its timeout once, not once per broker.

type tpKey struct {
	Topic     string
	Partition int32
}

// partState is what a partition's leader says of it.
type partState struct {
	HW, LSO   int64
	Producers []*pb.ProducerState
	Err       string
}

// fanOut calls f for each id in parallel and waits for all of them.
func fanOut[T any](ids []int32, f func(id int32) (T, error)) (map[int32]T, map[int32]error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out, bad := map[int32]T{}, map[int32]error{}
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := f(id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				bad[id] = err
			} else {
				out[id] = v
			}
		}()
	}
	wg.Wait()
	return out, bad
}

func (c *Console) broker(im *metadata.Image, id int32) (BrokerAPI, error) {
	b := im.Brokers[id]
	if b == nil {
		return nil, fmt.Errorf("broker %d is not registered", id)
	}
	if c.cfg.Broker == nil {
		return nil, fmt.Errorf("this node reaches no broker")
	}
	return c.cfg.Broker(b)
}

// liveBrokers are the unfenced brokers' ids, ascending.
func liveBrokers(im *metadata.Image) []int32 {
	var ids []int32
	for id, b := range im.Brokers {
		if !b.Fenced {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func sortedErrors(bad map[int32]error, what string) []string {
	var ids []int32
	for id := range bad {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out []string
	for _, id := range ids {
		out = append(out, fmt.Sprintf("%s from broker %d: %v", what, id, bad[id]))
	}
	return out
}

// partitionStates asks each partition's leader for its HW
// (ListOffsets latest, read_uncommitted), its LSO (latest,
// read_committed) and its active producers (DescribeProducers).
func (c *Console) partitionStates(ctx context.Context, im *metadata.Image, parts []*metadata.Partition, producers bool) (map[tpKey]*partState, []string) {
	out := map[tpKey]*partState{}
	byLeader := map[int32][]*metadata.Partition{}
	var leaders []int32
	for _, p := range parts {
		out[tpKey{p.Topic, p.Partition}] = &partState{HW: -1, LSO: -1}
		if p.Leader < 0 {
			out[tpKey{p.Topic, p.Partition}].Err = "no leader"
			continue
		}
		if byLeader[p.Leader] == nil {
			leaders = append(leaders, p.Leader)
		}
		byLeader[p.Leader] = append(byLeader[p.Leader], p)
	}
	type answer struct {
		hw, lso *pb.ListOffsetsResponse
		prod    *pb.DescribeProducersResponse
	}
	got, bad := fanOut(leaders, func(id int32) (answer, error) {
		var a answer
		api, err := c.broker(im, id)
		if err != nil {
			return a, err
		}
		var lo []*pb.ListOffsetsPartition
		var tps []*pb.TopicPartition
		for _, p := range byLeader[id] {
			lo = append(lo, &pb.ListOffsetsPartition{Topic: p.Topic, Partition: p.Partition, Timestamp: -1, CurrentLeaderEpoch: -1})
			tps = append(tps, &pb.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
		if a.hw, err = api.ListOffsets(ctx, &pb.ListOffsetsRequest{IsolationLevel: pb.IsolationLevel_READ_UNCOMMITTED, Partitions: lo}); err != nil {
			return a, err
		}
		if a.lso, err = api.ListOffsets(ctx, &pb.ListOffsetsRequest{IsolationLevel: pb.IsolationLevel_READ_COMMITTED, Partitions: lo}); err != nil {
			return a, err
		}
		if producers {
			if a.prod, err = api.DescribeProducers(ctx, &pb.DescribeProducersRequest{Partitions: tps}); err != nil {
				return a, err
			}
		}
		return a, nil
	})
	for id, err := range bad {
		for _, p := range byLeader[id] {
			out[tpKey{p.Topic, p.Partition}].Err = fmt.Sprintf("leader %d: %v", id, err)
		}
	}
	for _, a := range got {
		for _, r := range a.hw.GetPartitions() {
			if s := out[tpKey{r.Topic, r.Partition}]; s != nil {
				if r.ErrorCode != pb.ErrorCode_NONE {
					s.Err = codeText(r.ErrorCode, r.ErrorMessage)
					continue
				}
				s.HW = r.Offset
			}
		}
		for _, r := range a.lso.GetPartitions() {
			if s := out[tpKey{r.Topic, r.Partition}]; s != nil && r.ErrorCode == pb.ErrorCode_NONE {
				s.LSO = r.Offset
			}
		}
		for _, r := range a.prod.GetPartitions() {
			if s := out[tpKey{r.Topic, r.Partition}]; s != nil {
				if r.ErrorCode != pb.ErrorCode_NONE {
					if s.Err == "" {
						s.Err = "producers: " + codeText(r.ErrorCode, r.ErrorMessage)
					}
					continue
				}
				s.Producers = r.ActiveProducers
			}
		}
	}
	return out, sortedErrors(bad, "offsets")
}

func codeText(code pb.ErrorCode, msg string) string {
	if msg != "" {
		return code.String() + ": " + msg
	}
	return code.String()
}

// txn is one transactional id as its coordinator describes it.
type txn struct {
	ID          string
	ProducerID  int64
	Epoch       int32
	State       string
	Partitions  []string
	Start       time.Time // zero: none open
	Age         time.Duration
	Coordinator int32
	TimeoutMs   int32
}

// transactions lists every broker's transactional ids
// (ListTransactions) and has each coordinator describe its own
// (DescribeTransactions).
func (c *Console) transactions(ctx context.Context, im *metadata.Image) ([]*txn, []string) {
	now := c.cfg.Now()
	got, bad := fanOut(liveBrokers(im), func(id int32) ([]*txn, error) {
		api, err := c.broker(im, id)
		if err != nil {
			return nil, err
		}
		var ids []string
		listed := map[string]*pb.TransactionListing{}
		after := ""
		for page := 0; page < 100; page++ {
			resp, err := api.ListTransactions(ctx, &pb.ListTransactionsRequest{AfterTransactionalId: after})
			if err != nil {
				return nil, err
			}
			if resp.ErrorCode != pb.ErrorCode_NONE {
				return nil, errs.New(resp.ErrorCode, "ListTransactions")
			}
			for _, t := range resp.Transactions {
				if listed[t.TransactionalId] == nil {
					ids = append(ids, t.TransactionalId)
				}
				listed[t.TransactionalId] = t
				after = t.TransactionalId
			}
			if !resp.More || len(resp.Transactions) == 0 {
				break
			}
		}
		var out []*txn
		if len(ids) == 0 {
			return nil, nil
		}
		desc, err := api.DescribeTransactions(ctx, &pb.DescribeTransactionsRequest{TransactionalIds: ids})
		if err != nil {
			return nil, err
		}
		described := map[string]bool{}
		for _, d := range desc.Transactions {
			if d.ErrorCode != pb.ErrorCode_NONE {
				continue
			}
			described[d.TransactionalId] = true
			t := &txn{ID: d.TransactionalId, ProducerID: d.ProducerId, Epoch: d.ProducerEpoch, State: d.State, Coordinator: id, TimeoutMs: d.TransactionTimeoutMs, Age: -1}
			for _, tp := range d.Partitions {
				t.Partitions = append(t.Partitions, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
			}
			sort.Strings(t.Partitions)
			if d.TransactionStartTimeMs > 0 {
				t.Start = time.UnixMilli(d.TransactionStartTimeMs)
				t.Age = now.Sub(t.Start)
			}
			out = append(out, t)
		}
		// Listed but not described (moved away meanwhile): what the list said.
		for _, tid := range ids {
			if !described[tid] {
				l := listed[tid]
				out = append(out, &txn{ID: tid, ProducerID: l.ProducerId, Epoch: -1, State: l.State, Coordinator: id, Age: -1})
			}
		}
		return out, nil
	})
	var all []*txn
	for _, ts := range got {
		all = append(all, ts...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	return all, sortedErrors(bad, "transactions")
}

// openTxn is one producer's open transaction on one partition.
type openTxn struct {
	ProducerID  int64
	Epoch       int32
	FirstOffset int64
	LastWrite   time.Time
	// From the coordinator, when one lists the producer id.
	TransactionalID string
	State           string
	Start           time.Time
	Age             time.Duration // -1: unknown
	HoldsLSO        bool
	// Hanging says why the transaction may be hanging ("": it is not):
	// no coordinator knows the producer, or its transaction does not
	// include this partition (kafka-transactions find-hanging's test).
	Hanging string
}

// openTxns are a partition's producers with a transaction open on it,
// oldest first, joined with what the coordinators say of them.
// listed says every coordinator answered, so a producer none of them
// knows may be hanging.
func (c *Console) openTxns(topic string, partition int32, s *partState, byPID map[int64]*txn, listed bool) []*openTxn {
	tp := fmt.Sprintf("%s-%d", topic, partition)
	var out []*openTxn
	for _, p := range s.Producers {
		if p.CurrentTxnStartOffset < 0 {
			continue
		}
		o := &openTxn{ProducerID: p.ProducerId, Epoch: p.ProducerEpoch, FirstOffset: p.CurrentTxnStartOffset, Age: -1,
			HoldsLSO: s.LSO >= 0 && p.CurrentTxnStartOffset == s.LSO}
		if p.LastTimestamp > 0 {
			o.LastWrite = time.UnixMilli(p.LastTimestamp)
		}
		if t := byPID[p.ProducerId]; t != nil {
			o.TransactionalID, o.State = t.ID, t.State
			if !t.Start.IsZero() {
				o.Start, o.Age = t.Start, t.Age
			}
			if t.Epoch >= 0 && !slices.Contains(t.Partitions, tp) {
				o.Hanging = "its coordinator's transaction does not include " + tp
			}
		} else if listed {
			o.Hanging = "no coordinator knows producer " + strconv.FormatInt(p.ProducerId, 10)
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	return out
}

func txnsByPID(ts []*txn) map[int64]*txn {
	m := map[int64]*txn{}
	for _, t := range ts {
		if t.ProducerID >= 0 {
			m[t.ProducerID] = t
		}
	}
	return m
}

func anyOpen(states map[tpKey]*partState) bool {
	for _, s := range states {
		for _, p := range s.Producers {
			if p.CurrentTxnStartOffset >= 0 {
				return true
			}
		}
	}
	return false
}

// listedGroup is a group and the broker that coordinates it.
type listedGroup struct {
	ID           string
	State        string
	ProtocolType string
	Coordinator  int32
}

// groups lists every broker's groups (ListGroups).
func (c *Console) groups(ctx context.Context, im *metadata.Image) ([]*listedGroup, []string) {
	got, bad := fanOut(liveBrokers(im), func(id int32) ([]*listedGroup, error) {
		api, err := c.broker(im, id)
		if err != nil {
			return nil, err
		}
		resp, err := api.ListGroups(ctx, &pb.ListGroupsRequest{})
		if err != nil {
			return nil, err
		}
		if resp.ErrorCode != pb.ErrorCode_NONE {
			return nil, errs.New(resp.ErrorCode, "%s", resp.ErrorMessage)
		}
		var out []*listedGroup
		for _, g := range resp.Groups {
			out = append(out, &listedGroup{ID: g.GroupId, State: g.State, ProtocolType: g.ProtocolType, Coordinator: id})
		}
		return out, nil
	})
	var all []*listedGroup
	for _, gs := range got {
		all = append(all, gs...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	return all, sortedErrors(bad, "groups")
}

// groupOffset is one partition's committed offset, end offset and lag.
type groupOffset struct {
	Topic     string
	Partition int32
	Committed int64
	End       int64
	Lag       int64 // -1: unknown
	Err       string
}

// groupDetail is one group as its coordinator describes it.
type groupDetail struct {
	listedGroup
	Protocol   string
	Generation int32
	Members    []*pb.GroupMember
	Offsets    []*groupOffset
	TotalLag   int64 // -1: unknown
	Err        string
	// The group page shows at most maxRows members and offsets.
	MembersShown, OffsetsShown shown
}

// offsetFetch fills in d's committed offsets (OffsetFetch at its
// coordinator).
func (c *Console) offsetFetch(ctx context.Context, api BrokerAPI, d *groupDetail) {
	of, err := api.OffsetFetch(ctx, &pb.OffsetFetchRequest{GroupId: d.ID})
	if err != nil {
		d.Err = err.Error()
		return
	}
	if of.ErrorCode != pb.ErrorCode_NONE {
		d.Err = codeText(of.ErrorCode, of.ErrorMessage)
		return
	}
	for _, p := range of.Partitions {
		o := &groupOffset{Topic: p.Topic, Partition: p.Partition, Committed: p.Offset, End: -1, Lag: -1}
		if p.ErrorCode != pb.ErrorCode_NONE {
			o.Err = codeText(p.ErrorCode, p.ErrorMessage)
		}
		d.Offsets = append(d.Offsets, o)
	}
	sort.Slice(d.Offsets, func(i, j int) bool {
		a, b := d.Offsets[i], d.Offsets[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
}

// describeGroups describes groups at their coordinators (DescribeGroups,
// OffsetFetch) and measures each committed offset against its
// partition's HW.
func (c *Console) describeGroups(ctx context.Context, im *metadata.Image, gs []*listedGroup) ([]*groupDetail, []string) {
	byCoord := map[int32][]*listedGroup{}
	var coords []int32
	for _, g := range gs {
		if byCoord[g.Coordinator] == nil {
			coords = append(coords, g.Coordinator)
		}
		byCoord[g.Coordinator] = append(byCoord[g.Coordinator], g)
	}
	fetchSlots := make(chan struct{}, maxOffsetFetches)
	got, bad := fanOut(coords, func(id int32) ([]*groupDetail, error) {
		api, err := c.broker(im, id)
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, g := range byCoord[id] {
			ids = append(ids, g.ID)
		}
		desc, err := api.DescribeGroups(ctx, &pb.DescribeGroupsRequest{GroupIds: ids})
		if err != nil {
			return nil, err
		}
		byID := map[string]*pb.GroupDescription{}
		for _, d := range desc.Groups {
			byID[d.GroupId] = d
		}
		var out []*groupDetail
		for _, g := range byCoord[id] {
			d := &groupDetail{listedGroup: *g, TotalLag: -1}
			out = append(out, d)
			if gd := byID[g.ID]; gd != nil {
				if gd.ErrorCode != pb.ErrorCode_NONE {
					d.Err = gd.ErrorCode.String()
				} else {
					d.State, d.Protocol, d.Generation, d.Members = gd.State, gd.Protocol, gd.GenerationId, gd.Members
				}
			}
		}
		// One OffsetFetch per group, in parallel, at most
		// maxOffsetFetches in flight for the whole page.
		var wg sync.WaitGroup
		for _, d := range out {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case fetchSlots <- struct{}{}:
				case <-ctx.Done():
					d.Err = ctx.Err().Error()
					return
				}
				defer func() { <-fetchSlots }()
				c.offsetFetch(ctx, api, d)
			}()
		}
		wg.Wait()
		return out, nil
	})
	var all []*groupDetail
	var parts []*metadata.Partition
	seen := map[tpKey]bool{}
	for _, ds := range got {
		for _, d := range ds {
			all = append(all, d)
			for _, o := range d.Offsets {
				k := tpKey{o.Topic, o.Partition}
				if p := im.Partition(o.Topic, o.Partition); p != nil && !seen[k] {
					seen[k] = true
					parts = append(parts, p)
				}
			}
		}
	}
	problems := sortedErrors(bad, "group descriptions")
	states, more := c.partitionStates(ctx, im, parts, false)
	problems = append(problems, more...)
	for _, d := range all {
		total, known := int64(0), len(d.Offsets) > 0
		for _, o := range d.Offsets {
			s := states[tpKey{o.Topic, o.Partition}]
			if s == nil {
				o.Err = "no such partition"
			} else if s.HW >= 0 {
				o.End = s.HW
				if o.Committed >= 0 {
					o.Lag = max(s.HW-o.Committed, 0)
				}
			} else if o.Err == "" {
				o.Err = s.Err
			}
			if o.Lag < 0 {
				known = false
			} else {
				total += o.Lag
			}
		}
		if known {
			d.TotalLag = total
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	return all, problems
}
