package seams

// Allowed is the allowlist TestSeams holds the server packages against:
// each entry lets one function of one package make the calls of one rule
// kind, with the reason. An entry that matches no call fails the test, so
// remove an entry when its seam closes.
var Allowed = append([]Allow{
	// net: the seam implementations. Each is the default used when the
	// node's config (or the quorum's) hands in no listener or dialer;
	// testcluster's MemNet clusters hand in testkit/memnet's.
	{"node", "Start", "net", "the client (gRPC) listener when Config.Listener is nil"},
	{"node", "Node.listenInterBroker", "net", "the inter-broker listener when Config.InterBrokerListener is nil"},
	{"node", "Node.listenKafka", "net", "the Kafka listener when Config.KafkaListener is nil"},
	{"node", "Node.serve", "net", "the external listener (external.listen): no seam yet, not used by the simulation"},
	{"node", "Node.startHTTP", "net", "the metrics and console HTTP listener: no seam yet, not used by the simulation"},
	{"controller", "StartQuorum", "net", "the Raft dialer when QuorumConfig.Dial is nil"},
	{"controller", "raftListen", "net", "the Raft listener when QuorumConfig.Listener is nil"},
	{"controller", "Quorum.dialer", "net", "the AddVoter probe's dialer when QuorumConfig.Dial is nil"},

	// fs: files outside broker/storage. No file-system seam yet; the
	// simulation gives each node a temporary directory.
	{"node", "Start", "fs", "creates the data directory"},
	{"node", "readMeta", "fs", "reads meta.properties (node and cluster ids)"},
	{"node", "writeMeta", "fs", "writes meta.properties atomically"},
	{"controller", "StartQuorum", "fs", "creates the Raft directory (Raft's bolt store and snapshots are files of their own)"},
	{"controller", "firstStart", "fs", "reads the voter list the Raft state was first started with"},
	{"controller", "writeFileAtomic", "fs", "writes that voter list atomically"},

	// clock: functions of a component holding a clock.Clock that read the
	// time package. Either they measure work (a duration logged or
	// counted, not a decision), or they set a deadline that their own
	// timer, also on the time package, waits for: consistent with itself,
	// virtual inside the simulation's synctest bubble, but not yet on the
	// component's clock (a clock.Fake does not move them).
	{"broker", "Open", "clock", "measures how long loading a log took, for the log line"},
	{"broker/storage", "Log.flushToLocked", "clock", "measures flush time for the flush statistics"},
	{"broker/storage", "Log.Clean", "clock", "measures a cleaning pass for CleanStats.Elapsed"},
	{"coordinator/txn", "Coordinator.load", "clock", "measures loading a transaction log partition, for the log line"},
	{"controller", "Controller.inheritLeaderLeaseLocked", "clock", "Raft's last contact with the previous leader is wall-clock time: its age is carried over to the controller's clock"},
	{"api", "Deps.QuotaUnary", "clock", "measures the handler's work for the request-time quota"},
	{"replication", "Manager.fetch", "clock", "the fetch long poll's deadline and its timer: time package, not yet the clock"},
	{"coordinator/txn", "Coordinator.waitUntil", "clock", "waits for a pending transition with a deadline and timer on the time package, not yet the clock"},
	{"coordinator/txn", "Coordinator.decideLocked", "clock", "InitProducerId's wait for a busy transaction: deadline and timer on the time package, not yet the clock"},
	{"request", "Handler.waitForTopics", "clock", "CreateTopics waits for the topics to appear: a polling deadline on the time package, not yet the clock"},
	{"request", "Handler.deleteTopics", "clock", "DeleteTopics waits for the topics to go: a polling deadline on the time package, not yet the clock"},
	{"request", "Handler.createPartitions", "clock", "CreatePartitions waits for the partitions: a polling deadline on the time package, not yet the clock"},
}, storageFS...)

// storageFS: the real file system behind storage.FS (broker/storage/fs.go),
// the one place in broker/storage that calls the os package's file
// functions; node.Config.FS (testkit/simdisk in the simulation) replaces it.
var storageFS = func() []Allow {
	var out []Allow
	for _, fn := range []string{"OSFS.OpenFile", "OSFS.ReadFile", "OSFS.Remove", "OSFS.RemoveAll", "OSFS.Rename", "OSFS.MkdirAll", "OSFS.ReadDir", "OSFS.SyncDir"} {
		out = append(out, Allow{"broker/storage", fn, "fs", "the real file system behind storage.FS"})
	}
	return out
}()
