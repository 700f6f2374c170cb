package node

import (
	"syscall"
	"testing"
)

func TestFDBudget(t *testing.T) {
	for _, tc := range []struct {
		limit uint64
		files int
	}{
		{1024, 256}, // a quarter: connections take five eighths, Raft and the rest an eighth
		{4096, 1024},
		{40, 16},           // a floor, not zero
		{1 << 40, 1 << 18}, // an unlimited limit counts as 2^20
	} {
		b := budgetFor(tc.limit, 0)
		if b.segmentFiles != tc.files || b.maxPartitions != tc.files {
			t.Errorf("limit %d: %d segment files, %d partitions; want %d", tc.limit, b.segmentFiles, b.maxPartitions, tc.files)
		}
	}
}

// The soft limit is raised to the hard one (up to the ceiling) at start.
func TestRaiseNoFile(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip(err)
	}
	if old.Max < 2048 {
		t.Skipf("hard limit %d too low to test", old.Max)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	low := syscall.Rlimit{Cur: 1024, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	b, err := raiseNoFile()
	if err != nil {
		t.Fatal(err)
	}
	want := old.Max
	if want > fdCeiling {
		want = fdCeiling
	}
	var now syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now)
	if now.Cur != want || b.limit != want || b.raisedFrom != 1024 {
		t.Fatalf("soft limit %d, budget %+v; want it raised from 1024 to %d", now.Cur, b, want)
	}
}
