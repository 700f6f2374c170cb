package broker_test

import (
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/strand-io/strand/broker"
	"github.com/strand-io/strand/broker/storage"
	"github.com/strand-io/strand/clock"
	"github.com/strand-io/strand/internal/config"
)

func openManager(t *testing.T, dir string) *broker.Manager {
	t.Helper()
	cfg := broker.DefaultConfig(dir)
	cfg.Log.Files = storage.NewFileCache(4)
	m, err := broker.Open(cfg, clock.Real)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func checkpointedHW(t *testing.T, dir string) (int64, bool) {
	t.Helper()
	hws, err := storage.ReadOffsetCheckpoint(nil, filepath.Join(dir, broker.HighWatermarkFile))
	if err != nil {
		t.Fatal(err)
	}
	hw, ok := hws[key]
	return hw, ok
}

// TestManagerCheckpointsHighWatermark: the background loop writes the HW
// checkpoint every replica.high.watermark.checkpoint.interval.ms, and a
// manager opened after a crash (no clean close) starts each partition from
// the checkpointed HW; after a clean close, from the HW at close.
func TestManagerCheckpointsHighWatermark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		m := openManager(t, dir)
		p, err := m.GetOrCreate(key, nil)
		if err != nil {
			t.Fatal(err)
		}
		lead(t, p, 1)
		produce(t, p, 1, batch{n: 5})
		p.SetHighWatermark(3, false)
		if hw, _ := checkpointedHW(t, dir); hw != 0 {
			t.Fatalf("checkpointed HW %d before the interval, want 0", hw)
		}

		time.Sleep(broker.DefaultConfig(dir).CheckpointInterval) // virtual time (synctest)
		synctest.Wait()
		if hw, ok := checkpointedHW(t, dir); !ok || hw != 3 {
			t.Fatalf("checkpointed HW %d (present %v) after the interval, want 3", hw, ok)
		}

		p.SetHighWatermark(5, false)
		m.Abandon() // kill -9: the HW 5 was never checkpointed
		m = openManager(t, dir)
		if hw := m.Get(key).HighWatermark(); hw != 3 {
			t.Fatalf("HW after a crash = %d, want the checkpointed 3", hw)
		}
		m.Get(key).SetHighWatermark(5, false)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		m = openManager(t, dir)
		defer m.Close()
		if hw := m.Get(key).HighWatermark(); hw != 5 {
			t.Fatalf("HW after a clean close = %d, want 5", hw)
		}
	})
}

// TestManagerTopicConfigs: GetOrCreate applies a topic's
// min.insync.replicas over the broker default, and again when the
// partition already exists.
func TestManagerTopicConfigs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := openManager(t, t.TempDir())
		defer m.Close()
		p, err := m.GetOrCreate(key, map[string]string{config.MinInsyncReplicas: "2"})
		if err != nil {
			t.Fatal(err)
		}
		if p.MinISR() != 2 {
			t.Fatalf("min.insync.replicas = %d, want the topic's 2", p.MinISR())
		}
		again, err := m.GetOrCreate(key, map[string]string{config.MinInsyncReplicas: "3"})
		if err != nil || again != p || p.MinISR() != 3 {
			t.Fatalf("second GetOrCreate: same partition %v, min ISR %d, err %v; want the same, 3", again == p, p.MinISR(), err)
		}
		if all := m.All(); len(all) != 1 || all[0] != p {
			t.Fatalf("All() = %v", all)
		}
		if err := m.Delete(key); err != nil {
			t.Fatal(err)
		}
		if m.Get(key) != nil {
			t.Fatal("partition still there after Delete")
		}
	})
}

// The cleaner surveys exactly the logs whose topic is compacted (by the
// topic's cleanup.policy or the broker's log.cleanup.policy), each with
// the partition's last stable offset, min(HW, first unstable offset), as
// its upper bound: an open transaction's records are not cleaned. With
// log.cleaner.enable=false no cleaner runs; either way Close stops it.
func TestManagerCleanerCandidates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		m := openManager(t, dir)
		if !m.CleanerRunningForTest() {
			t.Fatal("no cleaner with Kafka's default log.cleaner.enable=true")
		}
		compact := storage.PartitionKey{Topic: "table", Partition: 0}
		both := storage.PartitionKey{Topic: "table-and-ttl", Partition: 0}
		p, err := m.GetOrCreate(compact, map[string]string{config.CleanupPolicy: "compact"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.GetOrCreate(both, map[string]string{config.CleanupPolicy: "delete,compact"}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.GetOrCreate(key, nil); err != nil {
			t.Fatal(err)
		}
		lead(t, p, 1)
		produce(t, p, 1, batch{n: 3})
		produce(t, p, 1, batch{pid: 9, epoch: 0, seq: 0, txn: true, n: 2}) // open at offset 3
		produce(t, p, 1, batch{n: 2})
		p.SetHighWatermark(7, false)
		got := m.CleanerCandidatesForTest()
		if len(got) != 2 || got[compact] != 3 || got[both] != 0 {
			t.Fatalf("candidates %v, want %s up to 3 (the open transaction) and %s up to 0", got, compact, both)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}

		cfg := broker.DefaultConfig(t.TempDir())
		cfg.Log.Cleanup = storage.CleanupCompact
		cfg.Cleaner.Enable = false
		m2, err := broker.Open(cfg, clock.Real)
		if err != nil {
			t.Fatal(err)
		}
		defer m2.Close()
		if m2.CleanerRunningForTest() {
			t.Fatal("a cleaner runs with log.cleaner.enable=false")
		}
		if _, err := m2.GetOrCreate(key, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := m2.GetOrCreate(compact, map[string]string{config.CleanupPolicy: "delete"}); err != nil {
			t.Fatal(err)
		}
		if got := m2.CleanerCandidatesForTest(); len(got) != 1 || got[key] != 0 {
			t.Fatalf("candidates %v under log.cleanup.policy=compact, want only %s", got, key)
		}
	})
}

// TestManagerGetOrCreateConcurrent: logs are opened outside the manager's
// lock, several at a time; callers opening the same partition at once get
// the same one, and Get answers while others open.
func TestManagerGetOrCreateConcurrent(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	const parts, callers = 16, 4
	got := make([][]*broker.Partition, callers)
	done := make(chan int)
	for c := 0; c < callers; c++ {
		got[c] = make([]*broker.Partition, parts)
		go func(c int) {
			for i := 0; i < parts; i++ {
				p, err := m.GetOrCreate(storage.PartitionKey{Topic: "c", Partition: int32(i)}, nil)
				if err != nil {
					t.Error(err)
				}
				got[c][i] = p
				m.Get(storage.PartitionKey{Topic: "c", Partition: int32(parts - 1 - i)})
			}
			done <- c
		}(c)
	}
	for c := 0; c < callers; c++ {
		<-done
	}
	for i := 0; i < parts; i++ {
		for c := 1; c < callers; c++ {
			if got[c][i] == nil || got[c][i] != got[0][i] {
				t.Fatalf("partition %d: caller %d got %p, caller 0 %p", i, c, got[c][i], got[0][i])
			}
		}
	}
	if n := len(m.All()); n != parts {
		t.Fatalf("%d partitions, want %d", n, parts)
	}
}
