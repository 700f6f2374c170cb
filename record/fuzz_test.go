package record

import (
	"encoding/binary"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// FuzzDecode: Decode never panics and fails only with CORRUPT_MESSAGE;
// when it succeeds, building the decoded records again with the header's
// options gives a batch that decodes to the same records.
//
// Random mutations almost never keep the CRC right, so each input is also
// decoded with its batchLength and CRC fixed up: that way the fuzzer
// reaches the decompressors and the record parser.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s.batch)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecodeProperty(t, b)
		if len(b) >= HeaderSize {
			fixed := append([]byte(nil), b...)
			binary.BigEndian.PutUint32(fixed[offBatchLength:], uint32(len(fixed)-LogOverhead))
			binary.BigEndian.PutUint32(fixed[offCRC:], crc32.Checksum(fixed[offAttributes:], castagnoli))
			checkDecodeProperty(t, fixed)
		}
	})
}

func checkDecodeProperty(t *testing.T, b []byte) {
	h, recs, err := Decode(b)
	if err != nil {
		if errs.CodeOf(err) != pb.ErrorCode_CORRUPT_MESSAGE {
			t.Fatalf("Decode failed with %v, not CORRUPT_MESSAGE", err)
		}
		return
	}
	if len(recs) != int(h.RecordCount) {
		t.Fatalf("Decode returned %d records for recordCount %d", len(recs), h.RecordCount)
	}
	if len(recs) == 0 {
		return // Build refuses empty batches; nothing to compare
	}
	opts := h.Options()
	sequential, allZero := true, true
	for i := range recs {
		sequential = sequential && recs[i].OffsetDelta == int32(i)
		allZero = allZero && recs[i].Timestamp == 0
	}
	if allZero {
		opts.FirstTimestamp = 0
	}
	rebuilt, err := Build(opts, recs)
	if err != nil {
		t.Fatalf("rebuilding %d decoded records: %v", len(recs), err)
	}
	h2, recs2, err := Decode(rebuilt)
	if err != nil {
		t.Fatalf("rebuilt batch does not decode: %v", err)
	}
	if h2.BaseOffset != h.BaseOffset || h2.PartitionLeaderEpoch != h.PartitionLeaderEpoch ||
		h2.ProducerID != h.ProducerID || h2.ProducerEpoch != h.ProducerEpoch || h2.BaseSequence != h.BaseSequence ||
		h2.Compression() != h.Compression() || h2.IsTransactional() != h.IsTransactional() ||
		h2.IsControl() != h.IsControl() || h2.LogAppendTime() != h.LogAppendTime() {
		t.Fatalf("rebuilt header %+v differs from %+v", h2, h)
	}
	for i := range recs {
		if d := recordDiff(&recs2[i], &recs[i], false); d != "" {
			t.Fatalf("record %d after rebuilding: %s", i, d)
		}
		if recs2[i].OffsetDelta != int32(i) || (sequential && recs2[i].Offset != recs[i].Offset) {
			t.Fatalf("record %d after rebuilding has offset %d (delta %d), was %d", i, recs2[i].Offset, recs2[i].OffsetDelta, recs[i].Offset)
		}
	}
}

type fuzzSeed struct {
	name  string
	batch []byte
	valid bool
}

// fuzzSeeds are the committed seed corpus: a valid batch of each codec,
// raw snappy, a control batch, and corruptions.
func fuzzSeeds() []fuzzSeed {
	recs := []Record{
		{Key: []byte("k"), Value: []byte("value-0"), Headers: []RecordHeader{{Key: "h", Value: []byte("1")}, {Key: "n"}}, Timestamp: 1000},
		{Key: nil, Value: []byte{}, Timestamp: 990},
		{Key: []byte{}, Value: nil, Timestamp: 1200},
	}
	var seeds []fuzzSeed
	for _, c := range allCodecs {
		opts := BatchOptions{BaseOffset: 5, PartitionLeaderEpoch: 1, Compression: c, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 3}
		b, err := Build(opts, recs)
		if err != nil {
			panic(err)
		}
		seeds = append(seeds, fuzzSeed{"valid-" + c.String(), b, true})
	}
	raw, _ := Build(plainOptions(None), recs)
	seeds = append(seeds,
		fuzzSeed{"valid-snappy-raw", craft(int16(Snappy), 3, 2, xerialRawBlock(raw[HeaderSize:])), true},
		fuzzSeed{"valid-control", BuildControlBatch(7, 1, ControlAbort, 4, 1000), true},
		fuzzSeed{"valid-logappendtime-gaps", craft(timestampTypeBit, 2, 9, []byte{0x0c, 0, 0, 0x04, 1, 1, 0, 0x0c, 0, 0, 0x10, 1, 1, 0}), true},
	)
	flipped := append([]byte(nil), seeds[0].batch...)
	flipped[len(flipped)-3] ^= 0x04
	seeds = append(seeds,
		fuzzSeed{"corrupt-crc", flipped, false},
		fuzzSeed{"corrupt-truncated", seeds[3].batch[:len(seeds[3].batch)-5], false},
		fuzzSeed{"corrupt-record-length", craft(0, 1, 0, []byte{0x7e, 0, 0, 0, 1, 1, 0}), false},
		fuzzSeed{"corrupt-header-count", craft(0, 1, 0, []byte{0x14, 0, 0, 0, 1, 1, 0xfe, 0xff, 0xff, 0xff, 0x07}), false},
		fuzzSeed{"corrupt-trailing", craft(0, 1, 0, append(append([]byte(nil), rec0...), 0xff)), false},
		fuzzSeed{"corrupt-count", craft(int16(LZ4), 1<<20, 1<<20, seeds[3].batch[HeaderSize:]), false},
	)
	return seeds
}

func xerialRawBlock(b []byte) []byte {
	out := xerialCompress(nil, b)
	return out[xerialHeaderSize+4:] // the one chunk's raw block
}

var updateSeeds = flag.Bool("update-fuzz-seeds", false, "rewrite testdata/fuzz/FuzzDecode from fuzzSeeds")

// TestFuzzSeedCorpus keeps the committed corpus meaningful: its valid-*
// files decode and its corrupt-* files do not. With -update-fuzz-seeds it
// rewrites the corpus first.
func TestFuzzSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if *updateSeeds {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, s := range fuzzSeeds() {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s.batch)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, s.name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		text, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(text), "\n", 3)
		if len(lines) < 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
			t.Fatalf("%s is not a fuzz corpus file", e.Name())
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		_, _, err = Decode([]byte(s))
		switch {
		case strings.HasPrefix(e.Name(), "valid-") && err != nil:
			t.Errorf("seed %s does not decode: %v", e.Name(), err)
		case strings.HasPrefix(e.Name(), "corrupt-") && err == nil:
			t.Errorf("seed %s decodes", e.Name())
		}
		checkDecodeProperty(t, []byte(s))
		seen++
	}
	if seen < len(fuzzSeeds()) {
		t.Fatalf("corpus holds %d seeds, want %d (run with -update-fuzz-seeds)", seen, len(fuzzSeeds()))
	}
}
