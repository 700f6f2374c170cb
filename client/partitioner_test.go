package client

import "testing"

// Kafka's own test vectors for Utils.murmur2 (UtilsTest.testMurmur2), so
// keys land on the same partitions as with the Java client.
func TestMurmur2MatchesKafka(t *testing.T) {
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
		"1":   -1993445489,
		"12":  126087238,
		"123": -267702483,
	}
	for k, want := range cases {
		if got := Murmur2([]byte(k)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", k, got, want)
		}
	}
}

func TestDefaultPartitioner(t *testing.T) {
	p := NewDefaultPartitioner()
	// A keyed record: toPositive(murmur2(key)) % n, stable.
	rec := &Record{Topic: "t", Key: []byte("foobar")}
	h := int32(-790332482)
	want := int32((uint32(h) & 0x7fffffff) % 6)
	for i := 0; i < 3; i++ {
		if got := p.Partition(rec, 6); got != want {
			t.Fatalf("keyed partition %d, want %d", got, want)
		}
	}
	// Unkeyed records stick to one partition until a batch fills.
	un := &Record{Topic: "t"}
	first := p.Partition(un, 6)
	for i := 0; i < 10; i++ {
		if got := p.Partition(un, 6); got != first {
			t.Fatalf("sticky partition moved without a full batch: %d then %d", first, got)
		}
	}
	p.OnNewBatch("t", 6)
	if got := p.Partition(un, 6); got == first {
		t.Fatal("sticky partition did not move after a batch filled")
	}
}

// Keyless records stay on the sticky partition until switchAfter bytes went
// to it (not one batch: a partition per 16 KiB batch multiplied the brokers'
// per-batch work on topics of many partitions), then move.
func TestDefaultPartitionerMovesAfterBytes(t *testing.T) {
	p := NewDefaultPartitioner()
	un := &Record{Topic: "t"}
	first := p.Partition(un, 1000)
	for i := 0; i < 99; i++ {
		p.Appended("t", 1000, 1024, 100*1024)
		if got := p.Partition(un, 1000); got != first {
			t.Fatalf("sticky partition moved after %d KiB of 100: %d then %d", i+1, first, got)
		}
	}
	p.Appended("t", 1000, 1024, 100*1024)
	second := p.Partition(un, 1000)
	if second == first {
		t.Fatal("sticky partition did not move after switchAfter bytes")
	}
	// The count starts again on the new partition.
	p.Appended("t", 1000, 50*1024, 100*1024)
	if got := p.Partition(un, 1000); got != second {
		t.Fatalf("sticky partition moved after half of switchAfter: %d then %d", second, got)
	}
	// Every partition is reached over time.
	seen := map[int32]bool{}
	for i := 0; i < 2000; i++ {
		p.Appended("t", 8, 1, 1)
		seen[p.Partition(un, 8)] = true
	}
	if len(seen) != 8 {
		t.Fatalf("keyless records reached %d of 8 partitions", len(seen))
	}
}
