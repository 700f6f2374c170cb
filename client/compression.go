package client

import (
	"fmt"
	"strings"

	"github.com/strand-io/strand/record"
)

// CompressionCodec is compression.type: the codec the producer compresses
// each batch with. It is record.Compression, the public codec type of the
// RecordBatch v2 format, whose values are Kafka's codec ids (the low three
// bits of a RecordBatch's attributes), so any Kafka consumer reads the
// batches; record.Gzip and client.Gzip are the same value.
type CompressionCodec = record.Compression

// The codecs of Kafka's RecordBatch v2 format.
const (
	// NoCompression writes records as they are (compression.type=none, the default).
	NoCompression = record.None
	// Gzip is compression.type=gzip.
	Gzip = record.Gzip
	// Snappy is compression.type=snappy (in the xerial framing Kafka's Java client writes).
	Snappy = record.Snappy
	// LZ4 is compression.type=lz4 (the LZ4 frame format).
	LZ4 = record.LZ4
	// Zstd is compression.type=zstd.
	Zstd = record.Zstd
)

// ParseCompression returns the codec a compression.type value names
// (none, gzip, snappy, lz4 or zstd, in any case).
func ParseCompression(name string) (CompressionCodec, error) {
	for c := NoCompression; c <= Zstd; c++ {
		if strings.EqualFold(name, c.String()) {
			return c, nil
		}
	}
	return NoCompression, fmt.Errorf("strand: unknown compression.type %q (none, gzip, snappy, lz4 or zstd)", name)
}
