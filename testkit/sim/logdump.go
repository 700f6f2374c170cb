package sim

import (
	"fmt"
	"strings"

	"github.com/strand-io/strand/record"
	"github.com/strand-io/strand/testkit/testcluster"
)

// logDump describes what every running node holds of the workload's
// topics when a run fails: each partition's log start and end, high
// watermark, last stable offset, epoch cache and aborted transactions,
// and its batches (offsets, producer id and epoch, transactional or not,
// the marker's type for a control batch). A failure that does not replay
// (a lost write, a torn transaction) is then read from the logs as they
// ended, not only from the events that led there.
func logDump(c *testcluster.Cluster, topics []string) string {
	var b strings.Builder
	b.WriteString("\n--- the workload's partitions on every running node, as the run ended\n")
	for _, mem := range c.Members() {
		n := c.NodeOf(mem.ID)
		if n == nil || n.Parts == nil {
			fmt.Fprintf(&b, "node %d: not running\n", mem.ID)
			continue
		}
		for _, p := range sortedParts(n) {
			wanted := false
			for _, t := range topics {
				wanted = wanted || p.Key.Topic == t
			}
			if !wanted {
				continue
			}
			l := p.Leadership()
			start, end := p.Log.LogStartOffset(), p.Log.LogEndOffset()
			fmt.Fprintf(&b, "node %d %s: %s at epoch %d, log [%d, %d), HW %d, LSO %d, epochs %v, aborted %v\n",
				mem.ID, p.Key, l.Role, l.LeaderEpoch, start, end, p.HighWatermark(), p.LastStableOffset(), p.Log.Epochs(), p.Log.AllAborted())
			for off := start; off < end; {
				res, err := p.Log.Read(off, 1<<20, end, true)
				if err != nil || len(res.Records) == 0 {
					fmt.Fprintf(&b, "  read at %d: %v\n", off, err)
					break
				}
				buf := res.Records
				for len(buf) >= record.HeaderSize {
					h, err := record.ParseHeader(buf)
					if err != nil || h.Size() > len(buf) {
						fmt.Fprintf(&b, "  batch at %d: %v\n", off, err)
						buf = nil
						break
					}
					fmt.Fprintf(&b, "  %s\n", describeBatch(buf[:h.Size()], h))
					off = h.BaseOffset + int64(h.LastOffsetDelta) + 1
					buf = buf[h.Size():]
				}
			}
		}
	}
	return b.String()
}

func describeBatch(batch []byte, h record.Header) string {
	s := fmt.Sprintf("[%d, %d] leader epoch %d, producer %d epoch %d seq %d", h.BaseOffset, h.BaseOffset+int64(h.LastOffsetDelta),
		h.PartitionLeaderEpoch, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	if h.IsTransactional() {
		s += ", transactional"
	}
	if h.IsControl() {
		kind := "marker (unreadable)"
		if _, recs, err := record.Decode(batch); err == nil && len(recs) > 0 {
			if t, coord, err := record.ParseControlRecord(recs[0]); err == nil {
				kind = fmt.Sprintf("%v marker (coordinator epoch %d)", t, coord)
			}
		}
		s += ", " + kind
	}
	return s
}
