package node

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/strand-io/strand/replication"
)

// Test-only fault endpoints, served on the metrics listener only when the
// node runs with Config.TestingFaults (strand server: STRAND_TESTING_FAULTS=1);
// otherwise they do not exist (404). They let a drill against real
// deployments (containers, processes) do what an in-process test does by
// calling the node:
//
//	POST /debug/faults/hold-follower-fetch?topic=T&partition=P&duration=8s
//	     hold the follower fetches of a partition this node leads
//	     (replication.Manager.HoldFollowerFetch; at most 30 s, released by
//	     itself); answers the hold as JSON, 409 when this node does not
//	     lead the partition
//	POST /debug/faults/release-follower-fetch?topic=T&partition=P
//	     end it early (200 either way; "released": false if none was held)
//
// With TLS on the HTTP listener only a super user or a broker may call
// them (faultAuth, as pprof): 401 without a client certificate, 403 for
// another principal.

// errNoBroker: the node has no broker role.
var errNoBroker = errors.New("this node has no broker role")

// HoldFollowerFetch holds the follower fetches of a partition this node
// leads for d (see replication.Manager.HoldFollowerFetch). Tests only.
func (n *Node) HoldFollowerFetch(topic string, partition int32, d time.Duration) (replication.FetchHold, error) {
	if n.Repl == nil {
		return replication.FetchHold{}, errNoBroker
	}
	return n.Repl.HoldFollowerFetch(topic, partition, d)
}

// ReleaseFollowerFetch ends a hold early; it reports whether one was in force.
func (n *Node) ReleaseFollowerFetch(topic string, partition int32) bool {
	if n.Repl == nil {
		return false
	}
	return n.Repl.ReleaseFollowerFetch(topic, partition)
}

func (n *Node) registerFaults(mux *http.ServeMux) {
	mux.HandleFunc("POST /debug/faults/hold-follower-fetch", n.faultAuth(func(w http.ResponseWriter, r *http.Request) {
		topic, part, ok := faultPartition(w, r)
		if !ok {
			return
		}
		d, err := time.ParseDuration(r.URL.Query().Get("duration"))
		if err != nil || d <= 0 || d > replication.MaxFollowerFetchHold {
			http.Error(w, "duration must be a Go duration in (0, "+replication.MaxFollowerFetchHold.String()+"]", http.StatusBadRequest)
			return
		}
		fh, err := n.HoldFollowerFetch(topic, part, d)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, fh)
	}))
	mux.HandleFunc("POST /debug/faults/release-follower-fetch", n.faultAuth(func(w http.ResponseWriter, r *http.Request) {
		topic, part, ok := faultPartition(w, r)
		if !ok {
			return
		}
		writeJSON(w, map[string]any{"topic": topic, "partition": part, "released": n.ReleaseFollowerFetch(topic, part)})
	}))
}

func faultPartition(w http.ResponseWriter, r *http.Request) (string, int32, bool) {
	q := r.URL.Query()
	topic := q.Get("topic")
	p, err := strconv.ParseInt(q.Get("partition"), 10, 32)
	if topic == "" || err != nil || p < 0 {
		http.Error(w, "topic and partition are required", http.StatusBadRequest)
		return "", 0, false
	}
	return topic, int32(p), true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
