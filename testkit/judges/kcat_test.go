package judges_test

// Real cluster on real time: the judges are Kafka clients from outside this code
// (librdkafka, kcat, kafka-python, sarama, franz-go) that dial real TCP sockets.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/testkit/judges"
)

// kcatMetadata is the part of `kcat -L -J` the test reads.
type kcatMetadata struct {
	Brokers []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32  `json:"partition"`
			Leader    int32  `json:"leader"`
			Error     string `json:"error"`
			Replicas  []struct {
				ID int32 `json:"id"`
			} `json:"replicas"`
			ISRs []struct {
				ID int32 `json:"id"`
			} `json:"isrs"`
		} `json:"partitions"`
	} `json:"topics"`
}

// TestKcat: kcat (librdkafka 2.0 through Debian's kcat 1.7) lists the
// cluster, produces keyed records with headers through an idempotent
// producer and reads them back read_committed, and finds offsets by
// timestamp.
func TestKcat(t *testing.T) {
	kcat := judges.Program(t, "kcat", "kcat")
	c, bootstrap := kafkaCluster(t)

	t.Run("metadata", func(t *testing.T) {
		const topic = "kcat-meta"
		c.CreateTopic(topic, 3, 3, nil)
		out := judges.Run(t, runTimeout, "", kcat, "-L", "-J", "-b", bootstrap, "-t", topic)
		var md kcatMetadata
		if err := json.Unmarshal([]byte(out), &md); err != nil {
			t.Fatalf("kcat -L -J printed no JSON: %v\n%s", err, out)
		}
		brokers := map[int32]string{}
		for _, b := range md.Brokers {
			brokers[b.ID] = b.Name
		}
		want := map[int32]string{}
		for _, m := range c.Members() {
			want[m.ID] = m.Cfg.KafkaListen
		}
		if fmt.Sprint(brokers) != fmt.Sprint(want) {
			t.Fatalf("brokers = %v, want each node's Kafka listener %v\n%s", brokers, want, out)
		}
		if len(md.Topics) != 1 || md.Topics[0].Topic != topic || md.Topics[0].Error != "" {
			t.Fatalf("topics = %+v, want %s alone without error\n%s", md.Topics, topic, out)
		}
		parts := md.Topics[0].Partitions
		if len(parts) != 3 {
			t.Fatalf("%s has %d partitions, want 3\n%s", topic, len(parts), out)
		}
		for _, p := range parts {
			var replicas, isr []int32
			for _, r := range p.Replicas {
				replicas = append(replicas, r.ID)
			}
			for _, r := range p.ISRs {
				isr = append(isr, r.ID)
			}
			slices.Sort(replicas)
			slices.Sort(isr)
			mp := c.Partition(topic, p.Partition)
			if mp == nil {
				t.Fatalf("kcat lists partition %d, which Strand does not have", p.Partition)
			}
			if p.Error != "" || !slices.Equal(replicas, []int32{1, 2, 3}) || !slices.Equal(isr, []int32{1, 2, 3}) || p.Leader < 1 || p.Leader > 3 {
				t.Fatalf("partition %d: leader %d replicas %v isr %v error %q; want a leader among 3 replicas, all in sync\n%s",
					p.Partition, p.Leader, replicas, isr, p.Error, out)
			}
		}
	})

	t.Run("produce-consume", func(t *testing.T) {
		const topic = "kcat-records"
		c.CreateTopic(topic, 3, 3, nil)
		const n = 30
		var in strings.Builder
		for i := range n {
			fmt.Fprintf(&in, "key-%02d:value %02d\n", i, i)
		}
		// kcat exits 0 even when librdkafka gives up (a fatal error, a
		// record not delivered): its stderr tells.
		args := []string{"-P", "-b", bootstrap, "-t", topic, "-K:", "-H", "trace=abc-1", "-H", "n=2",
			"-X", "enable.idempotence=true", "-X", "acks=all"}
		_, stderr, err := judges.RunErr(runTimeout, in.String(), kcat, args...)
		if err != nil || strings.Contains(stderr, "FATAL") || strings.Contains(stderr, "ERROR") || strings.Contains(stderr, "failed") {
			t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr)
		}

		out := judges.Run(t, runTimeout, "", kcat, "-C", "-b", bootstrap, "-t", topic,
			"-X", "isolation.level=read_committed", "-o", "beginning", "-e", "-q",
			"-f", "%p|%o|%k|%s|%h\n")
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != n {
			t.Fatalf("read %d records, want %d:\n%s", len(lines), n, out)
		}
		byPart := map[string][]string{} // partition -> offset|key in the order read
		var got []string
		for _, l := range lines {
			f := strings.Split(l, "|")
			if len(f) != 5 {
				t.Fatalf("line %q is not partition|offset|key|value|headers", l)
			}
			byPart[f[0]] = append(byPart[f[0]], f[1]+"|"+f[2])
			got = append(got, strings.Join(f[2:], "|"))
		}
		sort.Strings(got)
		for i, g := range got {
			if w := fmt.Sprintf("key-%02d|value %02d|trace=abc-1,n=2", i, i); g != w {
				t.Fatalf("record %d read back as %q, want %q\nall:\n%s", i, g, w, out)
			}
		}
		// One idempotent producer, one partition: offsets 0, 1, 2, ... in the
		// order the lines were read from stdin.
		for p, recs := range byPart {
			prev := ""
			for i, r := range recs {
				off, key, _ := strings.Cut(r, "|")
				if off != strconv.Itoa(i) || key <= prev {
					t.Fatalf("partition %s holds %v: want offsets from 0 up, keys in the order produced", p, recs)
				}
				prev = key
			}
		}
	})

	t.Run("query-by-timestamp", func(t *testing.T) {
		const topic = "kcat-times"
		c.CreateTopic(topic, 1, 3, nil)
		t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
		p, err := client.NewProducer(c.ClientOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		defer p.Close(ctx)
		var recs []*client.Record
		for i := range 3 { // offsets 0, 1, 2 at t0, t0+10s, t0+20s
			recs = append(recs, &client.Record{Topic: topic, Value: []byte{byte('a' + i)}, Timestamp: t0.Add(time.Duration(i) * 10 * time.Second)})
		}
		if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		ms := t0.UnixMilli()
		cases := []struct {
			ts   int64
			want int64 // the first offset whose timestamp is at or after ts; -1: none
		}{
			{ms - 5000, 0}, {ms, 0}, {ms + 1, 1}, {ms + 10000, 1}, {ms + 15000, 2}, {ms + 20000, 2}, {ms + 20001, -1},
		}
		for _, tc := range cases {
			out := judges.Run(t, runTimeout, "", kcat, "-Q", "-b", bootstrap, "-t", fmt.Sprintf("%s:0:%d", topic, tc.ts))
			want := fmt.Sprintf("%s [0] offset %d", topic, tc.want)
			if strings.TrimSpace(out) != want {
				t.Errorf("kcat -Q at %d (t0%+d ms) printed %q, want %q", tc.ts, tc.ts-ms, strings.TrimSpace(out), want)
			}
		}
	})
}
