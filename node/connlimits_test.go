package node

import "testing"

// The default caps leave the node at least three eighths of its
// descriptors, never let one address take more than a quarter of the
// client connections, and treat an unlimited descriptor limit as Kafka's
// Int.MaxValue.
func TestDefaultConnectionLimits(t *testing.T) {
	for _, tc := range []struct {
		nofile                    uint64
		maxConns, perIP, interBkr int
	}{
		{1024, 512, 128, 128},
		{20000, 10000, 1000, 2500},
		{1 << 20, 1 << 19, 1000, 1 << 17},
		{^uint64(0), 1 << 31, 1000, 1 << 29},
		{4, 2, 1, 1},
	} {
		m, p, ib := DefaultConnectionLimits(tc.nofile)
		if m != tc.maxConns || p != tc.perIP || ib != tc.interBkr {
			t.Errorf("nofile %d: got max.connections %d, per ip %d, inter-broker %d; want %d, %d, %d", tc.nofile, m, p, ib, tc.maxConns, tc.perIP, tc.interBkr)
		}
		if tc.nofile >= 64 && tc.nofile < 1<<32 && uint64(m+ib) > tc.nofile*5/8 {
			t.Errorf("nofile %d: connections may take %d descriptors, more than five eighths", tc.nofile, m+ib)
		}
	}
}
