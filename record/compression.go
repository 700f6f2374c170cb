package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Compression is the codec in attribute bits 0-2.
type Compression int8

const (
	None   Compression = 0
	Gzip   Compression = 1
	Snappy Compression = 2
	LZ4    Compression = 3
	Zstd   Compression = 4
)

func (c Compression) String() string {
	switch c {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return "unknown"
}

// Valid reports whether c is one of the five codecs of the format.
func (c Compression) Valid() bool { return c >= None && c <= Zstd }

// MaxDecompressedSize bounds what one compressed records section may
// decompress to. Decode refuses, with CORRUPT_MESSAGE, any batch whose
// records would decompress past it, and stops decompressing as soon as
// the limit is crossed, so a small batch cannot make a reader allocate
// without bound (a decompression bomb). It does not apply to uncompressed
// batches, whose size is their own. Set it before decoding starts: it is
// read without synchronisation.
var MaxDecompressedSize = 64 << 20

// Kafka's Java clients write snappy through snappy-java's stream format
// ("xerial" framing): this 8-byte magic, an int32 version and an int32
// minimum compatible version (both 1), then chunks of an int32 big-endian
// length and one raw snappy block of at most 32 KiB of input.
var xerialMagic = [8]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	xerialBlockSize  = 32 << 10
	// A snappy block cannot expand by more than ~21x (a 3-byte copy
	// yields at most 64 bytes); a declared length beyond this is a lie.
	maxSnappyRatio = 32
)

// compress appends the compressed form of src to dst.
func compress(dst []byte, c Compression, src []byte) ([]byte, error) {
	switch c {
	case None:
		return append(dst, src...), nil
	case Gzip:
		return gzipCompress(dst, src)
	case Snappy:
		return xerialCompress(dst, src), nil
	case LZ4:
		return lz4Compress(dst, src)
	case Zstd:
		return zstdEncoder().EncodeAll(src, dst), nil
	}
	return dst, errs.New(pb.ErrorCode_UNSUPPORTED_COMPRESSION_TYPE, "unknown compression codec %d", c)
}

// decompress returns the decompressed records section, a new buffer of at
// most limit bytes. Every failure is CORRUPT_MESSAGE.
func decompress(c Compression, src []byte, limit int) ([]byte, error) {
	sp, out, err := decompressScratch(c, src, limit)
	if err != nil || sp == nil {
		return out, err
	}
	cp := make([]byte, len(out))
	copy(cp, out)
	putScratch(sp, out)
	return cp, nil
}

// decompressScratch is decompress into a pooled scratch buffer when the
// codec allows (sp not nil: the caller hands it back with putScratch(sp,
// out) once done with out), else into a new one (sp nil).
func decompressScratch(c Compression, src []byte, limit int) (sp *[]byte, out []byte, err error) {
	limit = max(0, min(limit, math.MaxInt32))
	switch c {
	case Gzip:
		sp, out, err = gunzip(src, limit)
	case Snappy:
		out, err := unsnappy(src, limit)
		return nil, out, err
	case LZ4:
		sp, out, err = unlz4(src, limit)
	case Zstd:
		sp, out, err = unzstd(src, limit)
	default:
		return nil, nil, corrupt("unknown compression codec %d", c)
	}
	if err == nil {
		return sp, out, nil
	}
	if sp != nil {
		putScratch(sp, out)
	}
	if err == errTooBig {
		return nil, nil, tooBig(c, limit)
	}
	if e, ok := err.(*errs.Error); ok {
		return nil, nil, e
	}
	return nil, nil, corrupt("%s records section does not decompress: %v", c, err)
}

func corrupt(format string, args ...any) *errs.Error {
	return errs.New(pb.ErrorCode_CORRUPT_MESSAGE, format, args...)
}

func tooBig(c Compression, limit int) error {
	return corrupt("%s records section decompresses past the %d-byte limit (MaxDecompressedSize)", c, limit)
}

var errTooBig = errors.New("decompressed size over the limit")

// readLimited reads r to EOF, failing with errTooBig as soon as more
// than limit bytes come out. It decompresses into a pooled buffer that
// grows by doubling, so memory follows what is actually produced, never
// what a header claims, and returns that buffer (sp, to hand back with
// putScratch once done with it).
func readLimited(r io.Reader, srcLen, limit int) (*[]byte, []byte, error) {
	sp := getScratch()
	buf := (*sp)[:0]
	if cap(buf) == 0 {
		buf = make([]byte, 0, min(max(4*srcLen, 4096), limit+1))
	}
	for {
		end := min(cap(buf), limit+1)
		if len(buf) == end {
			if len(buf) > limit {
				putScratch(sp, buf)
				return nil, nil, errTooBig
			}
			buf = slices.Grow(buf, min(cap(buf), limit+1-len(buf)))
			end = min(cap(buf), limit+1)
		}
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			putScratch(sp, buf)
			return nil, nil, errTooBig
		}
		if err == io.EOF {
			return sp, buf, nil
		}
		if err != nil {
			putScratch(sp, buf)
			return nil, nil, err
		}
	}
}

// appendWriter is an io.Writer appending to a slice.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// gzip: writers and readers are pooled with their buffers.

type gzipEnc struct {
	w appendWriter
	z *gzip.Writer
}

var gzipEncPool = sync.Pool{New: func() any {
	e := &gzipEnc{}
	e.z, _ = gzip.NewWriterLevel(&e.w, gzip.DefaultCompression)
	return e
}}

func gzipCompress(dst, src []byte) ([]byte, error) {
	e := gzipEncPool.Get().(*gzipEnc)
	defer gzipEncPool.Put(e)
	return encodeStream(&e.w, e.z, dst, src)
}

// streamEncoder is a reusable compressing writer (gzip, lz4).
type streamEncoder interface {
	io.WriteCloser
	Reset(io.Writer)
}

// encodeStream compresses src with z, appending to dst through w.
func encodeStream(w *appendWriter, z streamEncoder, dst, src []byte) ([]byte, error) {
	w.b = dst
	z.Reset(w)
	_, err := z.Write(src)
	if err == nil {
		err = z.Close()
	}
	out := w.b
	w.b = nil
	return out, err
}

type gzipDec struct {
	r bytes.Reader
	z gzip.Reader
}

var gzipDecPool = sync.Pool{New: func() any { return &gzipDec{} }}

func gunzip(src []byte, limit int) (*[]byte, []byte, error) {
	d := gzipDecPool.Get().(*gzipDec)
	defer gzipDecPool.Put(d)
	d.r.Reset(src)
	defer d.r.Reset(nil)
	if err := d.z.Reset(&d.r); err != nil {
		return nil, nil, err
	}
	return readLimited(&d.z, len(src), limit)
}

// lz4: the LZ4 frame format as Kafka's clients write it (64 KiB
// independent blocks, no content checksum: the batch CRC covers it).

type lz4Enc struct {
	w appendWriter
	z *lz4.Writer
}

var lz4EncPool = sync.Pool{New: func() any {
	e := &lz4Enc{}
	e.z = lz4.NewWriter(&e.w)
	_ = e.z.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false))
	return e
}}

func lz4Compress(dst, src []byte) ([]byte, error) {
	e := lz4EncPool.Get().(*lz4Enc)
	defer lz4EncPool.Put(e)
	return encodeStream(&e.w, e.z, dst, src)
}

type lz4Dec struct {
	r bytes.Reader
	z *lz4.Reader
}

var lz4DecPool = sync.Pool{New: func() any {
	d := &lz4Dec{}
	d.z = lz4.NewReader(&d.r)
	return d
}}

func unlz4(src []byte, limit int) (*[]byte, []byte, error) {
	d := lz4DecPool.Get().(*lz4Dec)
	defer lz4DecPool.Put(d)
	d.r.Reset(src)
	d.z.Reset(&d.r)
	sp, out, err := readLimited(d.z, len(src), limit)
	d.z.Reset(&d.r)
	d.r.Reset(nil)
	return sp, out, err
}

// zstd: one shared encoder and one shared decoder, both safe for
// concurrent EncodeAll/DecodeAll.

var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithZeroFrames(true))
	if err != nil {
		panic("record: zstd encoder: " + err.Error())
	}
	return e
})

type zstdDecoder struct {
	limit int
	d     *zstd.Decoder
}

var (
	zstdDec   atomic.Pointer[zstdDecoder]
	zstdDecMu sync.Mutex
)

// zstdDecoderFor returns the shared decoder whose memory limit is limit,
// making a new one if MaxDecompressedSize changed since the last.
func zstdDecoderFor(limit int) (*zstd.Decoder, error) {
	if c := zstdDec.Load(); c != nil && c.limit == limit {
		return c.d, nil
	}
	zstdDecMu.Lock()
	defer zstdDecMu.Unlock()
	if c := zstdDec.Load(); c != nil && c.limit == limit {
		return c.d, nil
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(uint64(max(limit, 1))))
	if err != nil {
		return nil, err
	}
	zstdDec.Store(&zstdDecoder{limit: limit, d: d})
	return d, nil
}

func unzstd(src []byte, limit int) (*[]byte, []byte, error) {
	d, err := zstdDecoderFor(limit)
	if err != nil {
		return nil, nil, err
	}
	sp := getScratch()
	z, err := d.DecodeAll(src, (*sp)[:0])
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || len(z) > limit {
		putScratch(sp, z)
		return nil, nil, errTooBig
	}
	if errors.Is(err, zstd.ErrWindowSizeExceeded) {
		putScratch(sp, z)
		return nil, nil, corrupt("zstd frame's window is larger than the %d-byte limit (MaxDecompressedSize)", limit)
	}
	if err != nil {
		putScratch(sp, z)
		return nil, nil, err
	}
	return sp, z, nil
}

// snappy

func xerialCompress(dst, src []byte) []byte {
	dst = append(dst, xerialMagic[:]...)
	dst = binary.BigEndian.AppendUint32(dst, 1) // version
	dst = binary.BigEndian.AppendUint32(dst, 1) // minimum compatible version
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialBlockSize)]
		src = src[len(chunk):]
		start := len(dst)
		dst = slices.Grow(dst, 4+s2.MaxEncodedLen(len(chunk)))
		enc := s2.EncodeSnappy(dst[start+4:cap(dst)], chunk)
		dst = dst[:start+4+len(enc)]
		binary.BigEndian.PutUint32(dst[start:], uint32(len(enc)))
	}
	return dst
}

func isXerial(src []byte) bool {
	return len(src) >= len(xerialMagic) && bytes.Equal(src[:len(xerialMagic)], xerialMagic[:])
}

// unsnappy decodes a xerial-framed stream (concatenated streams too) or,
// failing the magic, one raw snappy block. Declared lengths are summed and
// checked against the limit before the one output buffer is allocated.
func unsnappy(src []byte, limit int) ([]byte, error) {
	if !isXerial(src) {
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return nil, corrupt("raw snappy records section: %v", err)
		}
		if n > limit {
			return nil, tooBig(Snappy, limit)
		}
		if n > maxSnappyRatio*len(src) {
			return nil, corrupt("raw snappy block of %d bytes claims %d decompressed bytes", len(src), n)
		}
		out, err := snappy.DecodeStrict(make([]byte, n), src)
		if err != nil {
			return nil, corrupt("raw snappy records section: %v", err)
		}
		return out, nil
	}
	total := 0
	err := xerialChunks(src, func(block []byte) error {
		n, err := snappy.DecodedLen(block)
		if err != nil {
			return corrupt("xerial snappy chunk: %v", err)
		}
		if n > maxSnappyRatio*len(block) {
			return corrupt("xerial snappy chunk of %d bytes claims %d decompressed bytes", len(block), n)
		}
		if total += n; total > limit {
			return tooBig(Snappy, limit)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]byte, total)
	pos := 0
	err = xerialChunks(src, func(block []byte) error {
		n, _ := snappy.DecodedLen(block)
		dec, err := snappy.DecodeStrict(out[pos:pos+n], block)
		if err != nil {
			return corrupt("xerial snappy chunk: %v", err)
		}
		if len(dec) != n || (n > 0 && &dec[0] != &out[pos]) {
			copy(out[pos:pos+n], dec)
		}
		pos += n
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// xerialChunks calls fn with each raw block of a xerial stream.
func xerialChunks(src []byte, fn func(block []byte) error) error {
	pos := 0
	for pos < len(src) {
		rest := src[pos:]
		if isXerial(rest) {
			if len(rest) < xerialHeaderSize {
				return corrupt("xerial snappy header truncated at %d of %d bytes", len(rest), xerialHeaderSize)
			}
			pos += xerialHeaderSize
			continue
		}
		if len(rest) < 4 {
			return corrupt("xerial snappy chunk length truncated at byte %d", pos)
		}
		n := int32(binary.BigEndian.Uint32(rest))
		if n < 0 || int(n) > len(rest)-4 {
			return corrupt("xerial snappy chunk at byte %d claims %d bytes, %d left", pos, n, len(rest)-4)
		}
		if err := fn(rest[4 : 4+n]); err != nil {
			return err
		}
		pos += 4 + int(n)
	}
	return nil
}
