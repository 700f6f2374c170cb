package metadata

import (
	"fmt"
	"sort"

	pb "github.com/strand-io/strand/proto/strand/v1"
)

// FeatureStrandVersion is the feature that versions Strand's own formats,
// as Kafka's metadata.version versions its metadata records: the
// controller stamps every metadata batch (and Raft snapshot) with its
// finalized level, and a binary refuses a batch stamped above what it
// reads. Level 0 (never finalized) is what binaries before the feature
// wrote. Level 1 stamps the batches and makes the controller check every
// broker's supported levels at registration, so a binary that predates a
// finalized level is kept out instead of misreading what it cannot know.
// A new cluster starts at StrandVersionMax; an upgraded one stays at its
// level until an operator finalizes it (`strand features upgrade`), which
// is refused while a registered broker does not support the level.
const (
	FeatureStrandVersion = "strand.version"
	StrandVersionMax     = 1
)

// MetadataFormatMax is the highest metadata format (a batch's
// format_version) this binary reads.
const MetadataFormatMax = StrandVersionMax

// LegacyFeatures is what a broker supports when its registration names no
// features: binaries from before the field supported transaction.version
// up to 2 and had no strand.version.
var LegacyFeatures = map[string]FeatureRange{
	FeatureTransactionVersion: {Min: 0, Max: 2},
}

// FormatVersion is the metadata format batches are written in now: the
// finalized strand.version.
func (im *Image) FormatVersion() int32 { return im.Features[FeatureStrandVersion] }

// FormatError is a metadata batch this binary cannot read: written in a
// newer format, or holding a record kind it does not know. A node that
// meets one stops rather than apply part of the batch and diverge.
type FormatError struct {
	Offset int64
	Format int32 // the batch's format_version
	Detail string
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("metadata at offset %d %s; this binary reads metadata formats up to %d (strand.version %d): run a newer Strand binary on this node",
		e.Offset, e.Detail, MetadataFormatMax, StrandVersionMax)
}

// checkFormat refuses a batch this binary cannot read.
func checkFormat(batch *pb.MetadataBatch) error {
	if batch.FormatVersion > MetadataFormatMax {
		return &FormatError{Offset: batch.Offset, Format: batch.FormatVersion,
			Detail: fmt.Sprintf("is written in format %d", batch.FormatVersion)}
	}
	for i, r := range batch.Records {
		if r.GetRecord() == nil {
			return &FormatError{Offset: batch.Offset, Format: batch.FormatVersion,
				Detail: fmt.Sprintf("holds a record kind this binary does not know (record %d of %d)", i+1, len(batch.Records))}
		}
	}
	return nil
}

// FeatureRanges turns registration ranges into a map (nil for none: a
// binary from before the field, see LegacyFeatures).
func FeatureRanges(rs []*pb.SupportedFeatureRange) map[string]FeatureRange {
	if len(rs) == 0 {
		return nil
	}
	m := make(map[string]FeatureRange, len(rs))
	for _, r := range rs {
		m[r.Name] = FeatureRange{Min: r.MinVersion, Max: r.MaxVersion}
	}
	return m
}

// SupportedRanges is SupportedFeatures as registration ranges, sorted by
// name: what this binary's broker registers with.
func SupportedRanges() []*pb.SupportedFeatureRange {
	return rangesOf(SupportedFeatures)
}

func rangesOf(m map[string]FeatureRange) []*pb.SupportedFeatureRange {
	if m == nil {
		return nil
	}
	out := make([]*pb.SupportedFeatureRange, 0, len(m))
	for n, r := range m {
		out = append(out, &pb.SupportedFeatureRange{Name: n, MinVersion: r.Min, MaxVersion: r.Max})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Supports is the range of a feature the broker's binary supports ({0, 0}
// for a feature it does not know: only "disabled").
func (b *Broker) Supports(name string) FeatureRange {
	m := b.Features
	if m == nil {
		m = LegacyFeatures
	}
	return m[name]
}

// UnsupportedFinalized names the first finalized level (sorted by feature)
// that ranges do not cover, or "" when they cover every one. nil ranges
// are LegacyFeatures.
func UnsupportedFinalized(finalized map[string]int32, ranges map[string]FeatureRange) string {
	if ranges == nil {
		ranges = LegacyFeatures
	}
	names := make([]string, 0, len(finalized))
	for n := range finalized {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		lvl := finalized[n]
		if lvl == 0 {
			continue
		}
		r, ok := ranges[n]
		if !ok || lvl < r.Min || lvl > r.Max {
			if !ok {
				return fmt.Sprintf("finalized version %d of %s, which it does not know", lvl, n)
			}
			return fmt.Sprintf("finalized version %d of %s (it supports %d-%d)", lvl, n, r.Min, r.Max)
		}
	}
	return ""
}
