package client

import (
	"fmt"
	"strings"

	"github.com/strand-io/strand/record"
)

// CompressionCodec is compression.type: the codec the producer compresses
// each batch with. Its values are Kafka's codec ids (the low three bits
// of a RecordBatch's attributes), so any Kafka consumer reads the batches.
type CompressionCodec int8

// The codecs of Kafka's RecordBatch v2 format.
const (
	// NoCompression writes records as they are (compression.type=none, the default).
	NoCompression CompressionCodec = 0
	// Gzip is compression.type=gzip.
	Gzip CompressionCodec = 1
	// Snappy is compression.type=snappy (in the xerial framing Kafka's Java client writes).
	Snappy CompressionCodec = 2
	// LZ4 is compression.type=lz4 (the LZ4 frame format).
	LZ4 CompressionCodec = 3
	// Zstd is compression.type=zstd.
	Zstd CompressionCodec = 4
)

// String is the codec's compression.type name: none, gzip, snappy, lz4 or zstd.
func (c CompressionCodec) String() string { return c.internal().String() }

func (c CompressionCodec) internal() record.Compression { return record.Compression(c) }

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
