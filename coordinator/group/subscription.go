package group

import (
	"errors"
	"hash/fnv"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
	"sync"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// DefaultConsumerProtocol is whether group.coordinator.rebalance.protocols
// includes "consumer" by default: it does, as in Kafka 4.
const DefaultConsumerProtocol = true

// group.consumer.migration.policy values (Kafka's).
const (
	MigrationBidirectional = "bidirectional"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

// ValidMigrationPolicy reports whether p is a group.consumer.migration.policy value.
func ValidMigrationPolicy(p string) bool {
	switch strings.ToLower(p) {
	case MigrationBidirectional, MigrationUpgrade, MigrationDowngrade, MigrationDisabled:
		return true
	}
	return false
}

func (c *Coordinator) upgradeEnabled() bool {
	p := strings.ToLower(c.cfg.MigrationPolicy)
	return p == MigrationBidirectional || p == MigrationUpgrade
}

func (c *Coordinator) downgradeEnabled() bool {
	p := strings.ToLower(c.cfg.MigrationPolicy)
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// ConsumerProtocolEnabled reports whether this coordinator serves the
// consumer rebalance protocol (the Kafka listener lists
// ConsumerGroupHeartbeat and ConsumerGroupDescribe only then).
func (c *Coordinator) ConsumerProtocolEnabled() bool { return c.cfg.ConsumerProtocol }

// TopicFilter reports whether a topic may be seen: a regular expression
// subscription resolves only to topics its member's principal may
// describe.
type TopicFilter func(topic string) bool

// image is the metadata image subscriptions resolve against.
func (c *Coordinator) image() *metadata.Image {
	if c.cfg.Image == nil {
		return metadata.EmptyImage()
	}
	if im := c.cfg.Image(); im != nil {
		return im
	}
	return metadata.EmptyImage()
}

// topicNames tracks, across images, the last image offset at which the
// set of topic names changed: regular expressions are resolved again only
// when it moved past their resolution.
type topicNames struct {
	mu          sync.Mutex
	offset      int64
	fingerprint uint64
	changedAt   int64
	seen        bool
}

// changedAt is the offset of the last image whose topic names differ from
// the image before it, as far as this coordinator has seen images.
func (n *topicNames) lastChange(im *metadata.Image) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen && im.Offset == n.offset {
		return n.changedAt
	}
	names := make([]string, 0, len(im.Topics))
	for name, t := range im.Topics {
		names = append(names, name+"\x00"+t.ID)
	}
	sort.Strings(names)
	h := fnv.New64a()
	for _, s := range names {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	fp := h.Sum64()
	if !n.seen || fp != n.fingerprint {
		n.changedAt = im.Offset
	}
	n.seen, n.offset, n.fingerprint = true, im.Offset, fp
	return n.changedAt
}

// subscriptionFor is what the group records of the topics it subscribes
// to: each one the image has (with an id), its id and partition count.
func subscriptionFor(names map[string]bool, im *metadata.Image) map[string]topicMeta {
	out := make(map[string]topicMeta, len(names))
	for name := range names {
		t := im.Topics[name]
		if t == nil || t.ID == "" {
			continue
		}
		out[name] = topicMeta{id: t.ID, name: name, partitions: int32(len(t.Partitions))}
	}
	return out
}

func sameSubscription(a, b map[string]topicMeta) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// compileRegex compiles a subscription's regular expression, matched
// against a whole topic name as Kafka (RE2J's matches) does. The error is
// INVALID_REGULAR_EXPRESSION with Kafka's message.
func compileRegex(re string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(re); err != nil {
		msg := err.Error()
		var se *syntax.Error
		if errors.As(err, &se) {
			msg = se.Code.String()
			if se.Expr != "" {
				msg += " near `" + se.Expr + "`"
			}
		}
		return nil, errs.New(pb.ErrorCode_INVALID_REGULAR_EXPRESSION, "SubscribedTopicRegex `%s` is not a valid regular expression: %s.", re, msg)
	}
	return regexp.Compile("^(?:" + re + ")$")
}

// resolveRegex lists the image's topics the expression matches and the
// filter lets through, sorted.
func resolveRegex(re *regexp.Regexp, im *metadata.Image, allow TopicFilter) []string {
	var out []string
	for name := range im.Topics {
		if re.MatchString(name) && (allow == nil || allow(name)) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
