package kafka

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzDecode feeds arbitrary frames (without the size prefix) to the
// request decoder: it never panics, refuses what it cannot decode as a
// protocol violation (which closes the connection), and what it decodes
// encodes again to bytes that decode to the same request.
func FuzzDecode(f *testing.F) {
	seed := func(req kmsg.Request) {
		b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
		b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
		b = binary.BigEndian.AppendUint32(b, 1)
		b = binary.BigEndian.AppendUint16(b, 0xffff) // null client id
		if requestFlexible(req.Key(), req.GetVersion()) {
			b = append(b, 0)
		}
		f.Add(req.AppendTo(b))
	}
	for key, a := range apis {
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(key)
			req.SetVersion(v)
			seed(req)
		}
	}
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	p.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte("not a batch")}}}}
	seed(p)
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, _, req, err := decode(frame)
		if err != nil {
			var pe *protocolError
			var us *unsupported
			if !errors.As(err, &pe) && !errors.Is(err, errNewerApiVersions) && !errors.As(err, &us) {
				t.Fatalf("decode refused a frame with %T %v, not a protocol violation", err, err)
			}
			return
		}
		if req.Key() != h.key || req.GetVersion() != h.version {
			t.Fatalf("decoded %d v%d from a header naming %d v%d", req.Key(), req.GetVersion(), h.key, h.version)
		}
		once := req.AppendTo(nil)
		again := kmsg.RequestForKey(h.key)
		again.SetVersion(h.version)
		if err := again.ReadFrom(once); err != nil {
			t.Fatalf("%s v%d: re-encoded request does not decode: %v", kmsg.NameForKey(h.key), h.version, err)
		}
		if twice := again.AppendTo(nil); !bytes.Equal(once, twice) {
			t.Fatalf("%s v%d: encoding is not stable", kmsg.NameForKey(h.key), h.version)
		}
	})
}
