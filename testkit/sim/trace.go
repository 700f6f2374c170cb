package sim

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// traceKeep is how many events the trace keeps per node (and for the
// cluster as a whole).
const traceKeep = 150

// traceLive (SIM_TRACE=1) also prints every event as it happens.
var traceLive = os.Getenv("SIM_TRACE") != ""

// trace keeps the last events of each node, on virtual time, for the
// report of a failing seed.
type trace struct {
	mu    sync.Mutex
	start time.Time
	rings map[int32][]string // 0: the cluster, the schedule and the workload
	// all is every event of the run, in order, each marked with its ring
	// ("n2", "n0" for the cluster's): a failing run writes it to a file
	// (dump), as a failure that does not replay can be read only there.
	all []string
	// clock, when set, hears the virtual time elapsed at every tick (the
	// watchdog outside the bubble reads it).
	clock func(time.Duration)
}

func (t *trace) tick() {
	if t.clock != nil {
		t.clock(time.Since(t.start))
	}
}

func newTrace() *trace { return &trace{start: time.Now(), rings: map[int32][]string{}} }

func (t *trace) add(node int32, format string, args ...any) {
	line := fmt.Sprintf("%8.3fs ", time.Since(t.start).Seconds()) + fmt.Sprintf(format, args...)
	if traceLive {
		fmt.Fprintf(os.Stderr, "sim n%d %s\n", node, line)
	}
	t.mu.Lock()
	r := append(t.rings[node], line)
	if len(r) > traceKeep {
		r = r[len(r)-traceKeep:]
	}
	t.rings[node] = r
	t.all = append(t.all, fmt.Sprintf("n%d %s", node, line))
	t.mu.Unlock()
}

// dump writes every event of the run, then tail, to a new file and
// returns its path ("" if it could not be written).
func (t *trace) dump(seed uint64, tail string) string {
	f, err := os.CreateTemp("", fmt.Sprintf("sim-seed%d-trace-*.txt", seed))
	if err != nil {
		return ""
	}
	defer f.Close()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.all {
		if _, err := fmt.Fprintln(f, l); err != nil {
			return ""
		}
	}
	if _, err := f.WriteString(tail); err != nil {
		return ""
	}
	return f.Name()
}

// Write takes the workload's progress lines into the cluster's ring.
func (t *trace) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if l != "" {
			t.add(0, "%s", l)
		}
	}
	return len(p), nil
}

func (t *trace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []int32
	for id := range t.rings {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var b strings.Builder
	for _, id := range ids {
		if id == 0 {
			fmt.Fprintf(&b, "--- cluster and workload, last %d events\n", traceKeep)
		} else if id == clientRing {
			fmt.Fprintf(&b, "--- the workload's clients (groups, offsets, positions), last %d events\n", traceKeep)
		} else {
			fmt.Fprintf(&b, "--- node %d, last %d events\n", id, traceKeep)
		}
		for _, l := range t.rings[id] {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// nodeLog is a slog handler that puts a node's log lines at Info and above
// into its ring of the trace: a failing seed shows what each node said
// (leaderships, coordinator loads, fences) next to what the monitor saw.
type nodeLog struct {
	t     *trace
	id    int32
	attrs []slog.Attr
	group string
	// clients: the SDK's clients of the workload (ring clientRing), at
	// Debug, but only their lines about groups, offsets and positions.
	clients bool
}

// clientRing is the trace's ring for the workload's clients.
const clientRing = 99

// clientWords pick the SDK's debug lines a failure needs.
var clientWords = []string{"assign", "revok", "rewind", "offset", "position", "join", "fenc", "generation", "reset"}

func (h *nodeLog) Enabled(_ context.Context, l slog.Level) bool {
	if h.clients {
		return l >= slog.LevelDebug
	}
	return l >= slog.LevelInfo
}

func (h *nodeLog) Handle(_ context.Context, r slog.Record) error {
	// Raft repeats its failed heartbeats and appends to an unreachable
	// peer many times a second: the faults that cause them are in the
	// trace already.
	if strings.Contains(r.Message, "failed to heartbeat") || strings.Contains(r.Message, "failed to appendEntries") {
		return nil
	}
	if h.clients && r.Level < slog.LevelInfo {
		keep := false
		low := strings.ToLower(r.Message)
		for _, w := range clientWords {
			if strings.Contains(low, w) {
				keep = true
				break
			}
		}
		if !keep {
			return nil
		}
	}
	var b strings.Builder
	b.WriteString(r.Level.String())
	b.WriteByte(' ')
	b.WriteString(r.Message)
	add := func(a slog.Attr) bool {
		if a.Key == "node" {
			return true
		}
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.t.add(h.id, "%s", b.String())
	return nil
}

func (h *nodeLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &nodeLog{t: h.t, id: h.id, attrs: append(append([]slog.Attr(nil), h.attrs...), as...), group: h.group, clients: h.clients}
}

func (h *nodeLog) WithGroup(name string) slog.Handler {
	return &nodeLog{t: h.t, id: h.id, attrs: h.attrs, group: name, clients: h.clients}
}
