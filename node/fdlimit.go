package node

import (
	"log/slog"
	"syscall"

	"github.com/strand-io/strand/broker/storage"
)

// fdBudget is how a node splits its file descriptors (RLIMIT_NOFILE),
// together with DefaultConnectionLimits: half for client connections, an
// eighth for the inter-broker listener, a quarter for segment files
// (storage.FileCache) and the last eighth for Raft, indexes, checkpoints and
// the like. Each partition replica needs its
// active segment's file to serve without reopening it on every write, so
// the node hosts at most that many replicas (max.broker.partitions).
type fdBudget struct {
	limit, raisedFrom uint64
	segmentFiles      int
	maxPartitions     int
}

// fdFilesShare is the segment files' share of the limit (a quarter).
const (
	fdFilesShare = 4
	fdCeiling    = 1 << 20 // an unlimited hard limit is taken as this
)

// raiseNoFile raises the soft RLIMIT_NOFILE to the hard limit when it can
// and returns the budget the limit allows.
func raiseNoFile() (fdBudget, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return fdBudget{}, err
	}
	b := fdBudget{limit: rl.Cur}
	want := rl.Max
	if want > fdCeiling {
		want = fdCeiling
	}
	if rl.Cur < want {
		nl := syscall.Rlimit{Cur: want, Max: rl.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &nl); err == nil {
			b.raisedFrom, b.limit = rl.Cur, want
		}
	}
	return budgetFor(b.limit, b.raisedFrom), nil
}

func budgetFor(limit, raisedFrom uint64) fdBudget {
	if limit > fdCeiling {
		limit = fdCeiling
	}
	files := int(limit / fdFilesShare)
	if files < 16 {
		files = 16
	}
	return fdBudget{limit: limit, raisedFrom: raisedFrom, segmentFiles: files, maxPartitions: files}
}

// applyFDBudget sizes the segment-file cache and lowers
// max.broker.partitions to what the descriptors allow, saying so.
func applyFDBudget(cfg *Config, lg *slog.Logger) {
	b, err := raiseNoFile()
	if err != nil {
		lg.Warn("cannot read the file descriptor limit (RLIMIT_NOFILE); segment files and partitions are not bounded by it", "err", err)
		return
	}
	if cfg.BrokerConfig.Log.Files == nil {
		cfg.BrokerConfig.Log.Files = storage.NewFileCache(b.segmentFiles)
	}
	configured := cfg.ControllerConfig.MaxBrokerPartitions
	if configured <= 0 || configured > b.maxPartitions {
		if configured > b.maxPartitions {
			lg.Warn("max.broker.partitions is more than this node's file descriptors can serve; lowering it",
				"configured", configured, "allowed", b.maxPartitions, "fileDescriptorLimit", b.limit)
		}
		cfg.ControllerConfig.MaxBrokerPartitions = b.maxPartitions
	}
	args := []any{"fileDescriptorLimit", b.limit, "segmentFilesOpenAtMost", cfg.BrokerConfig.Log.Files.Max,
		"maxBrokerPartitions", cfg.ControllerConfig.MaxBrokerPartitions}
	if b.raisedFrom > 0 {
		args = append(args, "raisedFrom", b.raisedFrom)
	}
	lg.Info("file descriptors", args...)
}
