package config

// What DescribeConfigs tells of each config (KIP-569): its type as Kafka's
// ConfigDef types it, and one line on what it does.

// Config types, as DescribeConfigs names them (Kafka's ConfigType).
const (
	TypeBoolean  = "BOOLEAN"
	TypeString   = "STRING"
	TypeInt      = "INT"
	TypeShort    = "SHORT"
	TypeLong     = "LONG"
	TypeDouble   = "DOUBLE"
	TypeList     = "LIST"
	TypeClass    = "CLASS"
	TypePassword = "PASSWORD"
)

// Doc is a config's type and documentation.
type Doc struct {
	Type string
	Text string
}

// docs holds every topic and broker config DescribeConfigs lists.
var docs = map[string]Doc{
	// Topic configs.
	SegmentBytes:           {TypeInt, "The size at which the active segment of a partition's log is closed and a new one started."},
	SegmentMs:              {TypeLong, "The age at which the active segment is closed and a new one started, even if it is not full."},
	RetentionMs:            {TypeLong, "How long a closed segment is kept before it is deleted (delete policy); -1 keeps segments forever."},
	RetentionBytes:         {TypeLong, "The size a partition's log may grow to before its oldest segments are deleted (delete policy); -1 is no limit."},
	FlushMessages:          {TypeLong, "How many records may be appended to a partition before its log is forced to disk."},
	FlushMs:                {TypeLong, "How long appended records may wait before the partition's log is forced to disk."},
	IndexIntervalBytes:     {TypeInt, "How many bytes of records lie between two entries of a segment's offset and time indexes."},
	MinInsyncReplicas:      {TypeInt, "The fewest in-sync replicas an acks=all write must reach; with fewer the write is refused."},
	UncleanLeaderElection:  {TypeBoolean, "Whether a replica outside the ISR may become leader when no in-sync one is left, at the cost of losing records."},
	MaxMessageBytes:        {TypeInt, "The largest record batch, in bytes, the partition accepts."},
	CleanupPolicy:          {TypeList, "What becomes of old records: delete removes whole old segments, compact keeps each key's latest record, or both."},
	MessageTimestampType:   {TypeString, "Whether a record's timestamp is the producer's (CreateTime) or the broker's (LogAppendTime)."},
	TimestampBeforeMaxMs:   {TypeLong, "How far in the past a produced record's timestamp may lie before the batch is refused."},
	TimestampAfterMaxMs:    {TypeLong, "How far in the future a produced record's timestamp may lie before the batch is refused."},
	ProducerIDExpirationMs: {TypeInt, "How long the partition keeps a producer id's state after its last write."},
	MinCleanableDirtyRatio: {TypeDouble, "The share of a compacted log that must be uncleaned before the cleaner takes it."},
	MinCompactionLagMs:     {TypeLong, "The shortest time a record stays in the log before compaction may remove it."},
	MaxCompactionLagMs:     {TypeLong, "The longest time a record may stay uncompacted: older dirty records make the log eligible whatever its ratio."},
	DeleteRetentionMs:      {TypeLong, "How long a tombstone outlives the cleaning pass that first kept it, so consumers can see the delete."},
	LeaderThrottledReplicas: {TypeList,
		"The replicas (partition:broker, or *) whose replication the leader side throttles to leader.replication.throttled.rate."},
	FollowerThrottledReplicas: {TypeList,
		"The replicas (partition:broker, or *) whose fetching the follower side throttles to follower.replication.throttled.rate."},

	// Broker configs.
	"log.segment.bytes":                 {TypeInt, "The segment size of topics that set no segment.bytes."},
	"log.roll.ms":                       {TypeLong, "The segment age of topics that set no segment.ms."},
	"log.retention.ms":                  {TypeLong, "The retention time of topics that set no retention.ms."},
	"log.retention.bytes":               {TypeLong, "The retention size of topics that set no retention.bytes."},
	"log.flush.interval.messages":       {TypeLong, "The records between forced flushes for topics that set no flush.messages."},
	"log.flush.interval.ms":             {TypeLong, "The time between forced flushes for topics that set no flush.ms."},
	"log.index.interval.bytes":          {TypeInt, "The index interval of topics that set no index.interval.bytes."},
	"log.cleanup.policy":                {TypeList, "The cleanup policy of topics that set no cleanup.policy."},
	"log.cleaner.min.cleanable.ratio":   {TypeDouble, "The dirty ratio that makes a log eligible for cleaning, for topics that set no min.cleanable.dirty.ratio."},
	"log.cleaner.min.compaction.lag.ms": {TypeLong, "The minimum compaction lag of topics that set no min.compaction.lag.ms."},
	"log.cleaner.max.compaction.lag.ms": {TypeLong, "The maximum compaction lag of topics that set no max.compaction.lag.ms."},
	"log.cleaner.delete.retention.ms":   {TypeLong, "How long tombstones are kept, for topics that set no delete.retention.ms."},
	"log.cleaner.enable":                {TypeBoolean, "Whether the broker runs the log cleaner; without it compacted topics are never cleaned."},
	"log.cleaner.threads":               {TypeInt, "How many logs the cleaner cleans at once."},
	"log.cleaner.dedupe.buffer.size":    {TypeLong, "The memory the cleaner's key maps share; a dirty section with more keys is cleaned in parts."},
	CleanerIOMaxBytesPerSecond:          {TypeDouble, "The bytes per second the cleaner's threads may read and write together."},
	CleanerBackoffMs:                    {TypeLong, "How long an idle cleaner thread sleeps before it looks for a dirty log again."},
	LeaderThrottledRate:                 {TypeLong, "The bytes per second this broker sends to throttled followers of the partitions it leads."},
	FollowerThrottledRate:               {TypeLong, "The bytes per second this broker fetches for its throttled follower replicas."},
}

// DocOf is what DescribeConfigs tells of config name; ok is false for a
// config it does not know (type UNKNOWN, no documentation).
func DocOf(name string) (Doc, bool) {
	d, ok := docs[name]
	return d, ok
}
