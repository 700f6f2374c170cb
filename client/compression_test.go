package client

import (
	"fmt"
	"testing"

	"github.com/strand-io/strand/record"
)

// A codec named with the client package's own constants (a program
// outside the module cannot name record) compresses every batch
// with it, and the broker reads the records back.
func TestCompressionCodecReachesTheBatches(t *testing.T) {
	for _, codec := range []CompressionCodec{NoCompression, Gzip, Snappy, LZ4, Zstd} {
		t.Run(codec.String(), func(t *testing.T) {
			b := &gateBroker{release: make(chan struct{})}
			close(b.release)
			startGate(t, b)
			p, ctx := gateProducer(t, b, Compression(codec), Linger(0))
			var recs []*Record
			for i := 0; i < 20; i++ {
				recs = append(recs, &Record{Topic: "t", Value: []byte(fmt.Sprintf("value %02d value value value", i))})
			}
			if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			for _, bt := range b.batches() {
				if c := bt.Header.Compression(); c != record.Compression(codec) {
					t.Fatalf("a batch compressed with %v, want %v", c, codec)
				}
			}
			values := b.values()
			if len(values) != len(recs) {
				t.Fatalf("the broker read %d records, want %d", len(values), len(recs))
			}
			for i, v := range values {
				if string(v) != string(recs[i].Value) {
					t.Fatalf("record %d is %q, want %q", i, v, recs[i].Value)
				}
			}
		})
	}
}

// The codecs carry Kafka's ids and compression.type names, both ways.
func TestCompressionCodecNames(t *testing.T) {
	for name, want := range map[string]CompressionCodec{"none": NoCompression, "gzip": Gzip, "snappy": Snappy, "lz4": LZ4, "zstd": Zstd, "ZSTD": Zstd} {
		got, err := ParseCompression(name)
		if err != nil || got != want {
			t.Errorf("ParseCompression(%q) = %v, %v; want %v", name, got, err, want)
		}
		if record.Compression(want).String() != want.String() {
			t.Errorf("%v is %v in the record format", want, record.Compression(want))
		}
	}
	if _, err := ParseCompression("brotli"); err == nil {
		t.Error("ParseCompression accepted brotli")
	}
	if _, err := NewProducer(Bootstrap("127.0.0.1:1"), Compression(CompressionCodec(7))); err == nil {
		t.Error("NewProducer accepted codec 7")
	}
}
