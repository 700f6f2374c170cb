package verify

import (
	"fmt"
	"sort"
	"strings"
)

// Check judges a history and counts its anomalies. It never fails: a
// history that breaks the model's own rules is reported under Malformed and
// judged as well as it can be.
//
// # Vocabulary
//
// A read is any observation: History.Reads and every Txn.Inputs. A
// position is one (partition, offset, value) some read saw. Each position
// is attributed to at most one write of that value in that partition:
// first to a write acknowledged at exactly that offset; then, positions
// seen by read_committed first and in offset order, to unacknowledged
// writes and finally to writes acknowledged elsewhere, preferring
// Committed over Unknown over Aborted transactions (the reading that
// invents no anomaly). A value normally has one write; only the stage's
// outputs are written again by retries of an aborted or unknown stage
// transaction, and attribution tells those copies apart.
//
// A write is visible when its position is in the final read_committed
// read. An Unknown transaction is proven committed when a read_committed
// read (live, final, or a stage input) saw any of its writes; from then on
// it is judged as Committed ("effectively committed"). A read_uncommitted
// read proves nothing.
//
// # Checks, and the unit each one counts
//
//   - LostWrites (per write): a write of an effectively committed
//     transaction that is not visible. The example says whether some
//     earlier read had seen it (the data vanished) or nobody ever did.
//     There is no separate "unseen" count like Jepsen's :unseen: because
//     the final read-back covers every partition completely, a committed
//     write nobody read is always also a lost write, so the count would
//     only repeat LostWrites.
//   - Duplicates (per written value): a value at more than one offset in the final
//     read_committed read (in any partitions: a downstream consumer would
//     see it twice; for the sink this is "a stage output repeated for the
//     same input", since OutputFor is injective), or at more offsets in the
//     final read_uncommitted read than it has writes (aborted stage
//     retries legitimately leave extra copies there).
//   - AbortedVisible (per write, G1a): a write of an Aborted transaction
//     seen by any read_committed read. Unknown transactions never count
//     here: once seen they are committed.
//   - VisibleBeforeCommit (per write): a live read_committed read saw a
//     write of a non-aborted transaction before that transaction's
//     CommitRequested, or the transaction never requested commit.
//     Aborted writes are left to AbortedVisible; reads without a time
//     are left to Malformed.
//   - OutOfOrder (per inversion): among one producer's writes attributed
//     to positions in the final reads of one partition, sorted by offset,
//     each neighbouring pair whose ProducerSeq goes down. Swapping two
//     neighbours counts 1; moving one write across k of its siblings
//     counts 1 or 2, not k.
//   - InconsistentOffsets (per partition-offset): more than one value at
//     one (partition, offset), counting every read (of any isolation,
//     live or final) and the acknowledged offsets of writes of
//     effectively committed transactions (an aborted or unproven write's
//     acknowledgement is not evidence, as in Jepsen).
//   - TornTxns (per transaction): some but not all of a transaction's
//     writes are visible. This always comes with LostWrites (a committed
//     or proven transaction missing a write) or AbortedVisible (an aborted
//     transaction with a visible write); it is kept apart so the
//     atomicity failure is named as such.
//   - OffsetMismatch (per source record, and per stage transaction and
//     partition): with O the group's final committed offset of a source
//     partition (0 when it has none), every effectively committed source
//     record visible below O must have exactly one output
//     (OutputFor(value)) visible in the sink, and none at or above O may
//     have any; and every effectively committed stage transaction must
//     have sent, for each partition it consumed from, the offset one past
//     the largest input offset it consumed there, or a larger one when
//     only offsets the final read_committed read does not hold (markers,
//     aborted data) lie between: a consumer's position moves past what it
//     skips. (An Offsets entry for a
//     partition it consumed nothing from is allowed: a stage may send its
//     unchanged position for every assigned partition; if such an entry
//     skips records, the first rule catches it through the group offset.)
//     An input processed twice is both a Duplicate (its output twice in
//     the sink) and an OffsetMismatch (a record below O without exactly
//     one output). Source records are positions attributed to a write;
//     unattributed extra copies are already Duplicates.
//   - Unwritten (per partition and value): a read saw a value that no
//     write put in that partition.
//   - Malformed (per problem): the history breaks its own rules (see
//     validate).
//   - HangingTxns, ReadCommittedBeforeReplicated, EpochAnomalies and
//     AbortFailed judge the transaction faults: see faultChecks. A write
//     the client never sent (Write.Unsent) is not attributed, so a read
//     of it is Unwritten.
func Check(h *History) Report {
	var r Report
	if h == nil {
		r.Malformed.add("nil history")
		return r
	}
	c := &checker{h: h, r: &r}
	c.validate()
	c.indexWrites()
	c.indexReads()
	c.attribute()
	c.prove()
	c.totals()
	c.lostWrites()
	c.duplicates()
	c.abortedVisible()
	c.visibleBeforeCommit()
	c.outOfOrder()
	c.inconsistentOffsets()
	c.tornTxns()
	c.offsetMismatch()
	c.unwritten()
	c.faultChecks()
	c.faultTotals()
	return r
}

// wref locates a write in the history.
type wref struct{ txn, w int }

type tpValue struct {
	tp    TP
	value string
}

type tpOffset struct {
	tp  TP
	off int64
}

type posKey struct {
	tp    TP
	off   int64
	value string
}

// position is one (partition, offset, value) seen by some read.
type position struct {
	tp    TP
	off   int64
	value string

	rc      bool // seen by a read_committed read (live, final or input)
	finalRC bool // in the final read_committed read
	finalRU bool // in the final read_uncommitted read

	first     *Read // first read of it, in history order
	firstLive *Read // first live read of it
	firstRC   *Read // first read_committed read of it
	liveRC    *Read // earliest (by Time) timed live read_committed read of it

	writer int // index into checker.writes; -1 when unattributed
}

func (p *position) final() bool { return p.finalRC || p.finalRU }

type checker struct {
	h *History
	r *Report

	writes    []wref
	writerPos []*position       // per write: its attributed position, or nil
	byTV      map[tpValue][]int // writes of a value in a partition
	byValue   map[string][]int  // writes of a value in any partition

	reads    []*Read
	pos      map[posKey]*position
	posOrder []*position // in order of first read
	tvOrder  []tpValue   // values in order of first position
	tvPos    map[tpValue][]*position

	proven []bool // per txn: Unknown and seen by a read_committed read
}

func (c *checker) txn(wi int) *Txn { return &c.h.Txns[c.writes[wi].txn] }

func (c *checker) write(wi int) *Write {
	ref := c.writes[wi]
	return &c.h.Txns[ref.txn].Writes[ref.w]
}

// outcome is t's outcome, an invalid one read as Unknown.
func outcome(t *Txn) Outcome {
	if t.Outcome.Valid() {
		return t.Outcome
	}
	return Unknown
}

func (c *checker) committed(ti int) bool {
	switch outcome(&c.h.Txns[ti]) {
	case Committed:
		return true
	case Unknown:
		return c.proven[ti]
	}
	return false
}

// outcomeDesc is "committed", "aborted", "unknown" or "unknown, proven
// committed".
func (c *checker) outcomeDesc(ti int) string {
	o := outcome(&c.h.Txns[ti])
	if o == Unknown && c.proven[ti] {
		return "unknown, proven committed"
	}
	return string(o)
}

func (c *checker) writeDesc(wi int) string {
	w, ref := c.write(wi), c.writes[wi]
	ack := "unacked"
	if w.Offset >= 0 {
		ack = fmt.Sprintf("acked at %d", w.Offset)
	}
	return fmt.Sprintf("%q to %s (%s) by txn %s (%s)", w.Value, w.TP, ack, c.h.Txns[ref.txn].ID, c.outcomeDesc(ref.txn))
}

func readDesc(rd *Read) string {
	iso := "read_uncommitted"
	if rd.ReadCommitted {
		iso = "read_committed"
	}
	kind := "live"
	if rd.Final {
		kind = "final"
	}
	s := fmt.Sprintf("%s %s read by %s of %q at %s@%d", kind, iso, rd.Reader, rd.Value, rd.TP, rd.Offset)
	if !rd.Time.IsZero() {
		s += " at " + rd.Time.Format("15:04:05.000000")
	}
	return s
}

// validate reports violations of the history model under Malformed.
func (c *checker) validate() {
	h, m := c.h, &c.r.Malformed
	if h.Transform != "" && h.Transform != TransformRule {
		m.add("transform %q is not the checker's rule %q", h.Transform, TransformRule)
	}
	type prodSeq struct {
		producer string
		seq      int64
	}
	seqs := map[prodSeq]string{}
	writers := map[string][]int{} // value -> txn indices
	var values []string
	checkRead := func(rd *Read, where string) {
		if rd.Offset < 0 {
			m.add("%s: read of %q at negative offset %d", where, rd.Value, rd.Offset)
		}
		if !rd.Final && rd.Time.IsZero() {
			m.add("%s: live read of %q at %s@%d has no time", where, rd.Value, rd.TP, rd.Offset)
		}
	}
	for ti := range h.Txns {
		t := &h.Txns[ti]
		if !t.Outcome.Valid() {
			m.add("txn %s: outcome %q is not committed, aborted or unknown (judged as unknown)", t.ID, t.Outcome)
		}
		if t.Outcome == Committed && t.CommitRequested.IsZero() {
			m.add("txn %s: committed but CommitRequested is zero", t.ID)
		}
		if t.Fence != "" && t.Fence != FenceEpochEnd && t.Fence != FenceZombie {
			m.add("txn %s: fence %q is not %q or %q", t.ID, t.Fence, FenceEpochEnd, FenceZombie)
		}
		for wi := range t.Writes {
			w := &t.Writes[wi]
			if w.Offset < -1 {
				m.add("txn %s: write %q has offset %d (use -1 for unacknowledged)", t.ID, w.Value, w.Offset)
			}
			if w.Unsent && (w.Offset != -1 || t.Outcome != Aborted) {
				m.add("txn %s: write %q is unsent but has offset %d in a %s transaction (want -1, aborted)", t.ID, w.Value, w.Offset, t.Outcome)
			}
			k := prodSeq{t.Producer, w.ProducerSeq}
			if prev, ok := seqs[k]; ok {
				m.add("producer %s: ProducerSeq %d used by %q and %q", t.Producer, w.ProducerSeq, prev, w.Value)
			} else {
				seqs[k] = w.Value
			}
			if _, ok := writers[w.Value]; !ok {
				values = append(values, w.Value)
			}
			writers[w.Value] = append(writers[w.Value], ti)
		}
		for i := range t.Inputs {
			checkRead(&t.Inputs[i], "txn "+t.ID+" input")
		}
	}
	for _, v := range values {
		tis := writers[v]
		if len(tis) < 2 {
			continue
		}
		for _, ti := range tis {
			if !h.Txns[ti].IsStage() {
				ids := make([]string, len(tis))
				for i, tj := range tis {
					ids[i] = h.Txns[tj].ID
				}
				m.add("value %q written %d times (txns %s) but only stage outputs may be rewritten", v, len(tis), strings.Join(ids, ", "))
				break
			}
		}
	}
	for i := range h.Reads {
		checkRead(&h.Reads[i], "read")
	}
	for _, in := range h.Incarnations {
		if in.Producer == "" {
			m.add("an incarnation (producerId=%d epoch %d) names no producer", in.PID.ID, in.PID.Epoch)
		}
	}
}

func (c *checker) indexWrites() {
	c.byTV = map[tpValue][]int{}
	c.byValue = map[string][]int{}
	for ti := range c.h.Txns {
		for wi, w := range c.h.Txns[ti].Writes {
			i := len(c.writes)
			c.writes = append(c.writes, wref{ti, wi})
			if w.Unsent {
				// Never sent: no position may be attributed to it, so a
				// read of it is Unwritten.
				continue
			}
			k := tpValue{w.TP, w.Value}
			c.byTV[k] = append(c.byTV[k], i)
			c.byValue[w.Value] = append(c.byValue[w.Value], i)
		}
	}
	c.writerPos = make([]*position, len(c.writes))
}

func (c *checker) indexReads() {
	for i := range c.h.Reads {
		c.reads = append(c.reads, &c.h.Reads[i])
	}
	for ti := range c.h.Txns {
		for i := range c.h.Txns[ti].Inputs {
			c.reads = append(c.reads, &c.h.Txns[ti].Inputs[i])
		}
	}
	c.pos = map[posKey]*position{}
	c.tvPos = map[tpValue][]*position{}
	for _, rd := range c.reads {
		k := posKey{rd.TP, rd.Offset, rd.Value}
		p := c.pos[k]
		if p == nil {
			p = &position{tp: rd.TP, off: rd.Offset, value: rd.Value, first: rd, writer: -1}
			c.pos[k] = p
			c.posOrder = append(c.posOrder, p)
			tv := tpValue{rd.TP, rd.Value}
			if len(c.tvPos[tv]) == 0 {
				c.tvOrder = append(c.tvOrder, tv)
			}
			c.tvPos[tv] = append(c.tvPos[tv], p)
		}
		if !rd.Final && p.firstLive == nil {
			p.firstLive = rd
		}
		if !rd.ReadCommitted {
			if rd.Final {
				p.finalRU = true
			}
			continue
		}
		p.rc = true
		if p.firstRC == nil {
			p.firstRC = rd
		}
		if rd.Final {
			p.finalRC = true
		} else if !rd.Time.IsZero() && (p.liveRC == nil || rd.Time.Before(p.liveRC.Time)) {
			p.liveRC = rd
		}
	}
}

// outcomeRank orders writers for attribution: committed first.
func outcomeRank(o Outcome) int {
	switch o {
	case Committed:
		return 0
	case Unknown:
		return 1
	}
	return 2
}

// attribute assigns positions to writes (see Check).
func (c *checker) attribute() {
	for _, tv := range c.tvOrder {
		ws := c.byTV[tv]
		if len(ws) == 0 {
			continue
		}
		ps := append([]*position(nil), c.tvPos[tv]...)
		sort.SliceStable(ps, func(i, j int) bool {
			if ps[i].rc != ps[j].rc {
				return ps[i].rc
			}
			return ps[i].off < ps[j].off
		})
		pref := append([]int(nil), ws...)
		sort.SliceStable(pref, func(i, j int) bool {
			return outcomeRank(outcome(c.txn(pref[i]))) < outcomeRank(outcome(c.txn(pref[j])))
		})
		assign := func(p *position, wi int) {
			p.writer = wi
			c.writerPos[wi] = p
		}
		// 1: acknowledged at exactly this offset.
		for _, p := range ps {
			for _, wi := range pref {
				if c.writerPos[wi] == nil && c.write(wi).Offset == p.off {
					assign(p, wi)
					break
				}
			}
		}
		// 2: unacknowledged writes, then 3: writes acknowledged elsewhere.
		for _, acked := range []bool{false, true} {
			for _, p := range ps {
				if p.writer >= 0 {
					continue
				}
				for _, wi := range pref {
					if c.writerPos[wi] == nil && (c.write(wi).Offset >= 0) == acked {
						assign(p, wi)
						break
					}
				}
			}
		}
	}
}

func (c *checker) prove() {
	c.proven = make([]bool, len(c.h.Txns))
	for wi, p := range c.writerPos {
		ti := c.writes[wi].txn
		if p != nil && p.rc && outcome(&c.h.Txns[ti]) == Unknown {
			c.proven[ti] = true
		}
	}
}

func (c *checker) totals() {
	t := &c.r.Totals
	for ti := range c.h.Txns {
		tx := &c.h.Txns[ti]
		n := len(tx.Writes)
		switch outcome(tx) {
		case Committed:
			t.CommittedTxns++
			t.CommittedRecords += n
		case Aborted:
			t.AbortedTxns++
			t.AbortedRecords += n
		default:
			t.UnknownTxns++
			t.UnknownRecords += n
			if c.proven[ti] {
				t.UnknownVisible++
			}
		}
		if tx.IsStage() {
			t.StageTxns++
		}
	}
	t.Reads = len(c.reads)
	for _, rd := range c.reads {
		if rd.Final {
			t.FinalReads++
		}
	}
}

func (c *checker) lostWrites() {
	for wi, p := range c.writerPos {
		if !c.committed(c.writes[wi].txn) || (p != nil && p.finalRC) {
			continue
		}
		seen := "never read by anyone"
		switch {
		case p == nil:
		case p.liveRC != nil:
			seen = "earlier seen by " + readDesc(p.liveRC)
		case p.firstLive != nil:
			seen = "earlier seen by " + readDesc(p.firstLive)
		case p.finalRU:
			seen = "present only in the final read_uncommitted read"
		}
		c.r.LostWrites.add("%s is not in the final read_committed read of %s; %s", c.writeDesc(wi), c.write(wi).TP, seen)
	}
}

func posList(ps []*position) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprintf("%s@%d", p.tp, p.off)
	}
	return strings.Join(s, ", ")
}

func (c *checker) duplicates() {
	var values []string
	rc, ru := map[string][]*position{}, map[string][]*position{}
	for _, p := range c.posOrder {
		if !p.final() {
			continue
		}
		if _, ok := rc[p.value]; !ok {
			if _, ok := ru[p.value]; !ok {
				values = append(values, p.value)
			}
		}
		if p.finalRC {
			rc[p.value] = append(rc[p.value], p)
		}
		if p.finalRU {
			ru[p.value] = append(ru[p.value], p)
		}
	}
	for _, v := range values {
		n := len(c.byValue[v])
		switch {
		case n > 0 && len(rc[v]) > 1:
			c.r.Duplicates.add("%q at %d offsets in the final read_committed read (%s); %d write(s) of it", v, len(rc[v]), posList(rc[v]), n)
		case n > 0 && len(ru[v]) > max(1, n):
			c.r.Duplicates.add("%q at %d offsets in the final read_uncommitted read (%s) but written only %d time(s)", v, len(ru[v]), posList(ru[v]), n)
		}
	}
}

func (c *checker) abortedVisible() {
	for _, p := range c.posOrder {
		if p.rc && p.writer >= 0 && outcome(c.txn(p.writer)) == Aborted {
			c.r.AbortedVisible.add("%s seen by %s", c.writeDesc(p.writer), readDesc(p.firstRC))
		}
	}
}

func (c *checker) visibleBeforeCommit() {
	for _, p := range c.posOrder {
		if p.liveRC == nil || p.writer < 0 {
			continue
		}
		t := c.txn(p.writer)
		if outcome(t) == Aborted {
			continue
		}
		switch {
		case t.CommitRequested.IsZero():
			c.r.VisibleBeforeCommit.add("%s seen by %s, but the txn never requested commit", c.writeDesc(p.writer), readDesc(p.liveRC))
		case p.liveRC.Time.Before(t.CommitRequested):
			c.r.VisibleBeforeCommit.add("%s seen by %s, %s before its commit was requested", c.writeDesc(p.writer), readDesc(p.liveRC), t.CommitRequested.Sub(p.liveRC.Time))
		}
	}
}

func (c *checker) outOfOrder() {
	type key struct {
		tp       TP
		producer string
	}
	var keys []key
	groups := map[key][]int{}
	for wi, p := range c.writerPos {
		if p == nil || !p.final() {
			continue
		}
		k := key{p.tp, c.txn(wi).Producer}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], wi)
	}
	for _, k := range keys {
		ws := groups[k]
		sort.SliceStable(ws, func(i, j int) bool { return c.writerPos[ws[i]].off < c.writerPos[ws[j]].off })
		for i := 1; i < len(ws); i++ {
			a, b := c.write(ws[i-1]), c.write(ws[i])
			if b.ProducerSeq < a.ProducerSeq {
				c.r.OutOfOrder.add("producer %s in %s: %q (seq %d) at offset %d before %q (seq %d) at offset %d",
					k.producer, k.tp, a.Value, a.ProducerSeq, c.writerPos[ws[i-1]].off, b.Value, b.ProducerSeq, c.writerPos[ws[i]].off)
			}
		}
	}
}

func (c *checker) inconsistentOffsets() {
	type claim struct {
		value, source string
	}
	var keys []tpOffset
	claims := map[tpOffset][]claim{}
	add := func(k tpOffset, value, source string) {
		cs, ok := claims[k]
		if !ok {
			keys = append(keys, k)
		}
		for _, cl := range cs {
			if cl.value == value {
				return
			}
		}
		claims[k] = append(cs, claim{value, source})
	}
	for _, p := range c.posOrder {
		add(tpOffset{p.tp, p.off}, p.value, "read by "+p.first.Reader)
	}
	for wi, ref := range c.writes {
		w := c.write(wi)
		if w.Offset >= 0 && c.committed(ref.txn) {
			add(tpOffset{w.TP, w.Offset}, w.Value, "acked to txn "+c.h.Txns[ref.txn].ID)
		}
	}
	for _, k := range keys {
		cs := claims[k]
		if len(cs) < 2 {
			continue
		}
		s := make([]string, len(cs))
		for i, cl := range cs {
			s[i] = fmt.Sprintf("%q (%s)", cl.value, cl.source)
		}
		c.r.InconsistentOffsets.add("%s@%d holds %s", k.tp, k.off, strings.Join(s, " and "))
	}
}

func (c *checker) tornTxns() {
	wi := 0
	for ti := range c.h.Txns {
		t := &c.h.Txns[ti]
		var vis, miss []string
		for range t.Writes {
			if p := c.writerPos[wi]; p != nil && p.finalRC {
				vis = append(vis, fmt.Sprintf("%q@%s", c.write(wi).Value, c.write(wi).TP))
			} else {
				miss = append(miss, fmt.Sprintf("%q@%s", c.write(wi).Value, c.write(wi).TP))
			}
			wi++
		}
		if len(vis) > 0 && len(miss) > 0 {
			c.r.TornTxns.add("txn %s (%s): %d of %d writes visible; visible %s, missing %s",
				t.ID, c.outcomeDesc(ti), len(vis), len(t.Writes), strings.Join(vis, " "), strings.Join(miss, " "))
		}
	}
}

func (c *checker) offsetMismatch() {
	h := c.h
	if h.SourceTopic != "" && h.SinkTopic != "" {
		outputs := map[string]int{}
		var src []*position
		for _, p := range c.posOrder {
			if !p.finalRC {
				continue
			}
			switch {
			case p.tp.Topic == h.SinkTopic:
				outputs[p.value]++
			case p.tp.Topic == h.SourceTopic && p.writer >= 0 && c.committed(c.writes[p.writer].txn):
				src = append(src, p)
			}
		}
		sort.SliceStable(src, func(i, j int) bool {
			if src[i].tp.Partition != src[j].tp.Partition {
				return src[i].tp.Partition < src[j].tp.Partition
			}
			return src[i].off < src[j].off
		})
		for _, p := range src {
			o, _ := h.GroupOffsets.Get(p.tp)
			n := outputs[OutputFor(p.value)]
			switch {
			case p.off < o && n != 1:
				c.r.OffsetMismatch.add("source %q at %s@%d is below the group's committed offset %d but has %d outputs in %s (want 1)",
					p.value, p.tp, p.off, o, n, h.SinkTopic)
			case p.off >= o && n > 0:
				c.r.OffsetMismatch.add("source %q at %s@%d is at or above the group's committed offset %d but has %d output(s) in %s (want 0)",
					p.value, p.tp, p.off, o, n, h.SinkTopic)
			}
		}
	}
	for ti := range h.Txns {
		t := &h.Txns[ti]
		if !t.IsStage() || !c.committed(ti) {
			continue
		}
		var tps []TP
		want := map[TP]int64{}
		for _, in := range t.Inputs {
			cur, ok := want[in.TP]
			if !ok {
				tps = append(tps, in.TP)
			}
			if !ok || in.Offset+1 > cur {
				want[in.TP] = in.Offset + 1
			}
		}
		for _, tp := range tps {
			got, ok := t.Offsets.Get(tp)
			switch {
			case !ok:
				c.r.OffsetMismatch.add("stage txn %s consumed %s up to %d but sent no offset for it", t.ID, tp, want[tp]-1)
			case got < want[tp]:
				c.r.OffsetMismatch.add("stage txn %s consumed %s up to %d but sent offset %d (want %d)", t.ID, tp, want[tp]-1, got, want[tp])
			case got > want[tp]:
				// A consumer's position moves past control records and
				// aborted data it skipped, so it may run ahead of the last
				// input; it must not skip a record read_committed shows.
				if off, skipped := c.firstVisibleIn(tp, want[tp], got); skipped {
					c.r.OffsetMismatch.add("stage txn %s consumed %s up to %d but sent offset %d, skipping the record at %d", t.ID, tp, want[tp]-1, got, off)
				}
			}
		}
	}
}

// firstVisibleIn returns the lowest offset in [from, to) of tp that the
// final read_committed read holds, if any.
func (c *checker) firstVisibleIn(tp TP, from, to int64) (int64, bool) {
	best, found := int64(0), false
	for _, p := range c.posOrder {
		if p.finalRC && p.tp == tp && p.off >= from && p.off < to && (!found || p.off < best) {
			best, found = p.off, true
		}
	}
	return best, found
}

func (c *checker) unwritten() {
	for _, tv := range c.tvOrder {
		if len(c.byTV[tv]) > 0 {
			continue
		}
		ps := c.tvPos[tv]
		c.r.Unwritten.add("%q at %s (%s) was never written there; first %s", tv.value, tv.tp, posList(ps), readDesc(ps[0].first))
	}
}
