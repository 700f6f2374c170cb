package main

import (
	"context"
	"fmt"
	"time"

	"github.com/strand-io/strand/client"
)

// findHanging applies kafka-transactions' algorithm: producers with an
// open transaction older than the maximum timeout whose transactional id
// is unknown, or whose coordinator's transaction does not list the
// partition, are hanging.
func findHanging(ctx context.Context, adm *client.Admin, topic string, part int32, maxMin int64) ([][]any, error) {
	md, err := adm.Metadata(ctx, true, topic)
	if err != nil {
		return nil, err
	}
	if len(md.Topics) != 1 || md.Topics[0].ErrorMessage != "" {
		return nil, fmt.Errorf("topic %s: %s", topic, md.Topics[0].ErrorMessage)
	}
	now := time.Now().UnixMilli()
	listing, err := adm.ListTransactions(ctx, client.ListTransactionsFilter{})
	if err != nil {
		return nil, err
	}
	byPID := map[int64][]string{}
	for _, l := range listing {
		byPID[l.ProducerID] = append(byPID[l.ProducerID], l.TransactionalID)
	}
	var rows [][]any
	for _, p := range md.Topics[0].Partitions {
		if part >= 0 && p.Partition != part {
			continue
		}
		tp := client.TopicPartition{Topic: topic, Partition: p.Partition}
		pp, err := adm.DescribeProducers(ctx, tp, -1)
		if err != nil {
			return nil, err
		}
		for _, ps := range pp.ActiveProducers {
			if ps.CurrentTxnStartOffset < 0 || now-ps.LastTimestamp < maxMin*60000 {
				continue
			}
			hanging := true
			for _, id := range byPID[ps.ProducerId] {
				st, err := adm.DescribeTransaction(ctx, id)
				if err != nil {
					continue
				}
				for _, tp2 := range st.Partitions {
					if tp2.Topic == topic && tp2.Partition == p.Partition && st.State == "Ongoing" {
						hanging = false
					}
				}
			}
			if hanging {
				rows = append(rows, []any{topic, p.Partition, ps.ProducerId, ps.ProducerEpoch, ps.CoordinatorEpoch,
					ps.CurrentTxnStartOffset, ps.LastTimestamp, (now - ps.LastTimestamp) / 60000})
			}
		}
	}
	return rows, nil
}

// printBlocking prints what pins a partition's LSO: the HW and LSO, and
// the open transaction starting at the LSO with its age, transactional id
// and coordinator state.
func printBlocking(ctx context.Context, adm *client.Admin, tp client.TopicPartition, format string) error {
	lo, err := adm.ListOffsets(ctx, []client.TopicPartition{tp}, client.OffsetLatest, client.ReadCommitted)
	if err != nil {
		return err
	}
	o := lo[tp]
	if o.Err != nil {
		return o.Err
	}
	pp, err := adm.DescribeProducers(ctx, tp, -1)
	if err != nil {
		return err
	}
	headers := []string{"Topic", "Partition", "HighWatermark", "LastStableOffset", "ProducerId", "ProducerEpoch", "StartOffset", "Age", "TransactionalId", "CoordinatorState"}
	var rows [][]any
	now := time.Now().UnixMilli()
	for _, ps := range pp.ActiveProducers {
		if ps.CurrentTxnStartOffset < 0 || ps.CurrentTxnStartOffset != o.LastStableOffset {
			continue
		}
		var id, state any
		listing, err := adm.ListTransactions(ctx, client.ListTransactionsFilter{ProducerIDs: []int64{ps.ProducerId}})
		if err == nil && len(listing) > 0 {
			id, state = listing[0].TransactionalID, listing[0].State
		}
		age := time.Duration(now-ps.LastTimestamp) * time.Millisecond
		rows = append(rows, []any{tp.Topic, tp.Partition, o.HighWatermark, o.LastStableOffset, ps.ProducerId,
			ps.ProducerEpoch, ps.CurrentTxnStartOffset, age.Round(time.Second).String(), id, state})
	}
	if len(rows) == 0 {
		rows = append(rows, []any{tp.Topic, tp.Partition, o.HighWatermark, o.LastStableOffset, nil, nil, nil, nil, nil, nil})
	}
	return printOut(format, headers, rows)
}
