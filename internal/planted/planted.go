// Package planted holds switches that put known, fixed bugs back into the
// code, one switch per fix. A checker that cannot catch a bug is part of the
// bug: each fix's test (and, for the exactly-once fixes, `strand verify`)
// is shown to fail with its switch on.
//
// The switches belong to tests only: nothing in a release binary can
// switch an old bug back on. Every switch is off unless
//
//   - a test turns it on with Set (which panics outside a test binary), or
//   - the binary was built with the build tag "planted" (go build -tags
//     planted; the drill scripts do so when PLANTED_BUGS is set) and the
//     server is started with STRAND_PLANTED_BUGS=name,name, to rehearse a
//     checker against a fixed bug put back (the server logs a warning for
//     each switch it finds on).
//
// A binary built without the tag (make build, make image, go build
// ./cmd/strand) never reads STRAND_PLANTED_BUGS; `strand server` refuses
// to start when it is set (CheckEnv), so a drill cannot silently rehearse
// nothing. Production code asks On(bug) at exactly the place its fix
// changed, and behaves as before the fix when it is on. On costs one
// atomic load.
package planted

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
)

// Bug names one fixed bug.
type Bug uint

// The bugs that can be put back. Their names (String) are what
// STRAND_PLANTED_BUGS takes.
const (
	// MarkerRetryUnreplicated: a re-sent marker that the partition already
	// applied is answered at once, before the ISR has it (item 1).
	MarkerRetryUnreplicated Bug = iota
	// LSOPassesUnreplicatedMarker: a completed transaction stops holding
	// back the last stable offset as soon as its marker is appended, not
	// once the high watermark passes the marker (item 2).
	LSOPassesUnreplicatedMarker
	// FenceEpochOverflow: the fence path of InitProducerId bumps the epoch
	// without the exhaustion check (item 3).
	FenceEpochOverflow
	// EmptyAbortRefused: an abort with no partition in the transaction is
	// answered INVALID_TXN_STATE (item 4).
	EmptyAbortRefused
	// FenceWritesPrepareEpochFence: a fence writes PREPARE_EPOCH_FENCE to the
	// transaction log instead of keeping it in memory (item 5).
	FenceWritesPrepareEpochFence
	// UnknownProducerSequenceRefused: a batch from a producer id the
	// partition does not know, with a sequence other than 0, is refused
	// UNKNOWN_PRODUCER_ID (item 6).
	UnknownProducerSequenceRefused
	// TxnOffsetCommitRefusedWhileCompleting: TxnOffsetCommit is refused while
	// the group is CompletingRebalance (item 7).
	TxnOffsetCommitRefusedWhileCompleting
	// ServeBeforeReady: a node answers client requests before it is
	// registered, unfenced and caught up with metadata (item 8).
	ServeBeforeReady
	// EndTxnRetryAfterRotationRefused: a transaction that rotated to a new
	// producer id forgets the last epoch of the old one, so the retry of the
	// EndTxn that rotated is refused INVALID_PRODUCER_ID_MAPPING (item 4).
	EndTxnRetryAfterRotationRefused
	// TxnOffsetCommitMemberRulesUnlikeKafka: TxnOffsetCommit checks who is
	// committing by Strand's older rules instead of Kafka's: a commit with a
	// generation but no member id is accepted, and one with generation -1
	// and a member id is refused even when the group is empty or unknown
	// (item 7).
	TxnOffsetCommitMemberRulesUnlikeKafka
	// StaleInstanceIDAnsweredUnknownMember: a request naming a
	// group.instance.id that now belongs to another member id, and the calls
	// of a static member replaced by its restart, are answered
	// UNKNOWN_MEMBER_ID instead of FENCED_INSTANCE_ID (item 7, KIP-345).
	StaleInstanceIDAnsweredUnknownMember
	// StaticRejoinRebalances: a static member rejoining a Stable group with
	// a new member id starts a rebalance when it is the leader or its
	// metadata bytes changed, instead of only when the group's protocol
	// would change (item 7, KIP-345).
	StaticRejoinRebalances
	// StaticRejoinNotPersisted: a static member's new member id is kept in
	// memory only, so a coordinator failover brings the old id back and
	// fences the running instance (item 7, KIP-345).
	StaticRejoinNotPersisted
	// ClientIgnoresInstanceFencing: the consumer leaves its group.instance.id
	// off SyncGroup, Heartbeat and OffsetCommit and takes FENCED_INSTANCE_ID
	// for UNKNOWN_MEMBER_ID, so a fenced instance rejoins and fences its
	// replacement in turn (item 7, KIP-345).
	ClientIgnoresInstanceFencing
	// AuthzSkipTxnOffsetCommitGroup: TxnOffsetCommit does not ask for Read
	// on the group, so a transactional producer commits offsets of any
	// group (item 3).
	AuthzSkipTxnOffsetCommitGroup
	// AuthzSkipProduceTopicWrite: Produce does not ask for Write on the
	// topic (item 3).
	AuthzSkipProduceTopicWrite
	// AuthzDenyIgnored: the standard authorizer skips DENY ACLs, so an
	// ALLOW for the same principal and resource wins.
	AuthzDenyIgnored
	// TLSRevocationIgnored: a client certificate on the ssl.crl.location
	// CRL is taken like any other.
	TLSRevocationIgnored
	// BrokerPrincipalUnchecked: on an SSL INTER_BROKER listener and the SSL
	// Raft transport any certificate the truststore verifies is served, not
	// only those of inter.broker.principals.
	BrokerPrincipalUnchecked
	// --- sasl --- begin
	// SaslGateOpen: a Kafka connection on a SASL listener is served
	// without authenticating first.
	SaslGateOpen
	// SaslTokenUnchecked: a gRPC call on a SASL listener is served without
	// a valid session token.
	SaslTokenUnchecked
	// --- sasl --- end
	// --- quotas (owner D) ---
	// DebugEndpointsUnauthenticated: with debug.endpoints.enable, /debug/pprof
	// answers every request, privileged or not.
	DebugEndpointsUnauthenticated
	// OpenTxnCapCountsCaller: the cap on open transactions per principal
	// counts the caller of AddPartitions instead of the principal the
	// transactional id was initialised by, so a partition leader's add
	// (transaction version 2) is never capped.
	OpenTxnCapCountsCaller
	// AuthzSkipScramAlter: AlterUserScramCredentials is served without
	// Alter on the cluster (hostile).
	AuthzSkipScramAlter
	// --- transactions: verification and epochs --- begin
	// TxnVerificationUnguarded: a leader appends a transactional batch
	// whose verification a marker ended after the coordinator answered,
	// so the late batch opens a transaction nobody ends (the last stable
	// offset stays behind it).
	TxnVerificationUnguarded
	// FenceAtLastEpochRotatesEarly: a fence at the last epoch moves the
	// transactional id to its next producer id with the abort, so the
	// fencing producer starts at epoch 1 (Kafka: 0).
	FenceAtLastEpochRotatesEarly
	// --- transactions: verification and epochs --- end
	// RemovedFetcherTruncates: a follower's fetcher removed while it waited
	// for the old leader still does its late work (the truncation after
	// OffsetForLeaderEpoch, a restart at the leader's log start, the
	// leader's high watermark and log start) whatever role the replica has
	// taken since, so a replica promoted meanwhile has its new log cut.
	RemovedFetcherTruncates
	// EpochBeforeRoleChange: a new leader epoch is recorded in the log
	// first and the role changes after, in two holds of the leadership
	// lock, so a stale fetcher's batch or a producer's at the old epoch
	// lands past the new epoch's start.
	EpochBeforeRoleChange
	// ShutdownUndoneByHeartbeat: a heartbeat of the same incarnation that
	// reaches the controller after a controlled shutdown unfences the
	// closing broker again.
	ShutdownUndoneByHeartbeat
	// ClientMarkersAccepted: a client's Produce of a control batch (a
	// transaction marker) is appended, though only the transaction
	// coordinator (WriteTxnMarkers) may write markers.
	ClientMarkersAccepted

	numBugs
)

var names = [numBugs]string{
	MarkerRetryUnreplicated:               "marker-retry-unreplicated",
	LSOPassesUnreplicatedMarker:           "lso-passes-unreplicated-marker",
	FenceEpochOverflow:                    "fence-epoch-overflow",
	EmptyAbortRefused:                     "empty-abort-refused",
	FenceWritesPrepareEpochFence:          "fence-writes-prepare-epoch-fence",
	UnknownProducerSequenceRefused:        "unknown-producer-sequence-refused",
	TxnOffsetCommitRefusedWhileCompleting: "txn-offset-commit-refused-while-completing",
	ServeBeforeReady:                      "serve-before-ready",
	EndTxnRetryAfterRotationRefused:       "end-txn-retry-after-rotation-refused",
	TxnOffsetCommitMemberRulesUnlikeKafka: "txn-offset-commit-member-rules-unlike-kafka",
	StaleInstanceIDAnsweredUnknownMember:  "stale-instance-id-answered-unknown-member",
	StaticRejoinRebalances:                "static-rejoin-rebalances",
	StaticRejoinNotPersisted:              "static-rejoin-not-persisted",
	ClientIgnoresInstanceFencing:          "client-ignores-instance-fencing",
	AuthzSkipTxnOffsetCommitGroup:         "authz-skip-txn-offset-commit-group",
	AuthzSkipProduceTopicWrite:            "authz-skip-produce-topic-write",
	AuthzDenyIgnored:                      "authz-deny-ignored",
	TLSRevocationIgnored:                  "tls-revocation-ignored",
	BrokerPrincipalUnchecked:              "broker-principal-unchecked",
	SaslGateOpen:                          "sasl-gate-open",
	SaslTokenUnchecked:                    "sasl-token-unchecked",
	DebugEndpointsUnauthenticated:         "debug-endpoints-unauthenticated",
	OpenTxnCapCountsCaller:                "open-txn-cap-counts-caller",
	AuthzSkipScramAlter:                   "authz-skip-scram-alter",
	TxnVerificationUnguarded:              "txn-verification-unguarded",
	FenceAtLastEpochRotatesEarly:          "fence-at-last-epoch-rotates-early",
	RemovedFetcherTruncates:               "removed-fetcher-truncates",
	EpochBeforeRoleChange:                 "epoch-before-role-change",
	ShutdownUndoneByHeartbeat:             "shutdown-undone-by-heartbeat",
	ClientMarkersAccepted:                 "client-markers-accepted",
}

// String is the bug's name.
func (b Bug) String() string {
	if b < numBugs {
		return names[b]
	}
	return fmt.Sprintf("bug(%d)", uint(b))
}

// EnvVar is the environment variable a server built with the tag
// "planted" reads its switches from.
const EnvVar = "STRAND_PLANTED_BUGS"

// BuildTag is the build tag without which no binary reads EnvVar.
const BuildTag = "planted"

var on atomic.Uint64

// fromEnv switches on the bugs v names (a binary built with the tag reads
// EnvVar at init). A misspelt switch must not silently rehearse nothing:
// it is an error.
func fromEnv(v string) error {
	bugs, err := Parse(v)
	if err != nil {
		return fmt.Errorf("%s: %v", EnvVar, err)
	}
	for _, b := range bugs {
		on.Or(1 << b)
	}
	return nil
}

// CheckEnv is what a server calls before it starts: nil when EnvVar is
// unset or empty, or when this binary was built with the tag (it has read
// the switches then); otherwise an error saying that the binary carries no
// planted bugs, so a drill that asked for one does not silently rehearse
// nothing.
func CheckEnv() error { return checkEnv(Built, os.Getenv(EnvVar)) }

func checkEnv(built bool, v string) error {
	if built || strings.TrimSpace(v) == "" {
		return nil
	}
	return fmt.Errorf("%s=%q is set, but this binary carries no planted bugs: "+
		"switches that put fixed bugs back exist only in a binary built with -tags %s "+
		"(PLANTED_BUGS=… scripts/drill.sh and scripts/franz-suite.sh build one); unset %s to run this one",
		EnvVar, v, BuildTag, EnvVar)
}

// On reports whether bug b is put back.
func On(b Bug) bool { return on.Load()&(1<<b) != 0 }

// Set puts b back until the returned function is called (tests: defer
// it, or pass it to t.Cleanup). Tests that use Set must not run in
// parallel with tests that depend on the fix. Set panics outside a test
// binary: a release binary has no way to switch a bug on.
func Set(b Bug) (restore func()) {
	mustBeTest(testing.Testing())
	on.Or(1 << b)
	return func() { on.And(^(uint64(1) << b)) }
}

func mustBeTest(testBinary bool) {
	if !testBinary {
		panic("planted.Set outside a test binary: switches that put fixed bugs back belong to tests only")
	}
}

// Active lists the switches that are on (a server logs them at start).
func Active() []Bug {
	var out []Bug
	for b := Bug(0); b < numBugs; b++ {
		if On(b) {
			out = append(out, b)
		}
	}
	return out
}

// All lists every switch.
func All() []Bug {
	out := make([]Bug, numBugs)
	for b := range out {
		out[b] = Bug(b)
	}
	return out
}

// Parse reads a comma-separated list of names.
func Parse(s string) ([]Bug, error) {
	var out []Bug
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		found := false
		for b, name := range names {
			if name == n {
				out = append(out, Bug(b))
				found = true
			}
		}
		if !found {
			known := append([]string(nil), names[:]...)
			sort.Strings(known)
			return nil, fmt.Errorf("unknown planted bug %q (known: %s)", n, strings.Join(known, ", "))
		}
	}
	return out, nil
}
