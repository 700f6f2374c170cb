package record

// Decode validates batch, which must be exactly one batch (as Iter.Batch
// returns), decompresses its records section and parses exactly
// RecordCount records from it, filling in each record's absolute Offset
// (BaseOffset + OffsetDelta) and Timestamp (FirstTimestamp +
// TimestampDelta, or MaxTimestamp for every record of a LogAppendTime
// batch).
//
// Ownership: for an uncompressed batch, Key, Value and header Values alias
// batch (capacity clipped, so appending to them copies), so batch must not
// be modified while the records are in use; for a compressed batch they
// alias one new buffer of exactly the decompressed section's size, shared
// by all the records and owned by them. Header Keys are always copies
// (records of one batch may share equal key strings), and the records'
// Headers slices are carved, capacity clipped, from a shared array.
// Header-less records have nil Headers. When header keys repeat from
// record to record, Decode makes about four allocations per batch,
// whatever its record count.
//
// Every failure is an *errs.Error with code CORRUPT_MESSAGE whose message
// says what is wrong: the checks of Validate, bytes after the batch, a
// section that does not decompress or decompresses past
// MaxDecompressedSize, a record that is malformed or overruns the section,
// offset deltas that are negative, not increasing or past lastOffsetDelta,
// and bytes left over after the last record. Decode never panics, and
// allocates in proportion to the bytes actually present, never to counts
// the batch declares. The header is returned whenever it could be parsed.
func Decode(batch []byte) (Header, []Record, error) {
	h, err := Validate(batch)
	if err != nil {
		return h, nil, err
	}
	if h.Size() != len(batch) {
		return h, nil, corrupt("%d bytes follow the %d-byte batch", len(batch)-h.Size(), h.Size())
	}
	section := batch[HeaderSize:]
	if c := h.Compression(); c != None {
		if section, err = decompress(c, section, MaxDecompressedSize); err != nil {
			return h, nil, err
		}
	}
	recs, err := decodeRecords(&h, section)
	return h, recs, err
}

// decodeRecords parses h.RecordCount records that must fill data exactly.
func decodeRecords(h *Header, data []byte) ([]Record, error) {
	count := int(h.RecordCount)
	if count > len(data)/minRecordSize {
		return nil, corrupt("recordCount %d cannot fit in a %d-byte records section (a record takes at least %d bytes)", count, len(data), minRecordSize)
	}
	if count == 0 {
		if len(data) != 0 {
			return nil, corrupt("recordCount 0 but the records section holds %d bytes", len(data))
		}
		return nil, nil
	}
	recs := make([]Record, count)
	logAppend := h.LogAppendTime()
	pos := 0
	prev := int32(-1)
	var sh shared
	for i := range recs {
		r := &recs[i]
		n, e := decodeRecord(data[pos:], r, &sh, count-1-i)
		if e != nil {
			return nil, corrupt("record %d of %d at byte %d of the records section: %s", i, count, pos, e.Message)
		}
		if r.OffsetDelta <= prev || r.OffsetDelta > h.LastOffsetDelta {
			return nil, corrupt("record %d has offsetDelta %d: deltas must increase from 0 up to lastOffsetDelta %d (previous %d)", i, r.OffsetDelta, h.LastOffsetDelta, prev)
		}
		prev = r.OffsetDelta
		r.Offset = h.BaseOffset + int64(r.OffsetDelta)
		if logAppend {
			r.Timestamp = h.MaxTimestamp
		} else {
			r.Timestamp = h.FirstTimestamp + r.TimestampDelta
		}
		pos += n
	}
	if pos != len(data) {
		return nil, corrupt("%d bytes of trailing garbage after record %d in the records section", len(data)-pos, count-1)
	}
	return recs, nil
}

// FindBatch returns the byte position and size of the batch whose base
// offset is offset in data (a segment file's bytes), walking the batches
// from the start; ok is false when no batch starts at that offset.
func FindBatch(data []byte, offset int64) (pos int64, size int, ok bool) {
	for it := NewIter(data); it.Next(); {
		if h := it.Header(); h.BaseOffset == offset {
			return int64(it.Pos() - h.Size()), h.Size(), true
		}
	}
	return 0, 0, false
}
