// Package storagetest helps tests and benchmarks that drive a
// storage.Log's cleaner by hand.
package storagetest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/strand-io/strand/broker/storage"
)

// CleanAll rolls the active segment (so everything written is cleanable)
// and runs cleaning passes with the cleaner's clock at now until one makes
// no progress, summing them. The upper bound is the log end, or the first
// unstable offset below it; delete.retention.ms is Kafka's default (one
// day), so passes a day after the first ones remove the tombstones and
// markers whose data is gone.
func CleanAll(l *storage.Log, segmentBytes int64, now time.Time) (storage.CleanStats, error) {
	if err := l.Roll(); err != nil {
		return storage.CleanStats{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var sum storage.CleanStats
	for pass := 0; pass < 100; pass++ {
		upper := l.LogEndOffset()
		if fu, ok := l.FirstUnstableOffset(); ok && fu < upper {
			upper = fu
		}
		st, err := l.Clean(ctx, storage.CleanOptions{UpperBound: upper, NowMs: now.UnixMilli(),
			DeleteRetentionMs: 86_400_000, MaxMapEntries: 1 << 22, MaxSegmentBytes: segmentBytes})
		if err != nil {
			if pass > 0 && errors.Is(err, storage.ErrCleanAborted) {
				break
			}
			return sum, err
		}
		if pass == 0 {
			sum.FirstDirty, sum.SegmentsBefore = st.FirstDirty, st.SegmentsBefore
		}
		sum.NextDirty, sum.SegmentsAfter = st.NextDirty, st.SegmentsAfter
		sum.BytesRead += st.BytesRead
		sum.BytesWritten += st.BytesWritten
		sum.RecordsRead += st.RecordsRead
		sum.RecordsWritten += st.RecordsWritten
		sum.Elapsed += st.Elapsed
		if st.NextDirty <= st.FirstDirty || l.CleanableState(upper, now.UnixMilli(), 0).DirtyBytes == 0 {
			break
		}
	}
	return sum, nil
}

// EnvInt is the positive integer in environment variable name, def when
// it is unset; anything else fails tb.
func EnvInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
