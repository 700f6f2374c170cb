package node_test

// Real node on real time: the metrics and debug HTTP endpoints listen on real TCP;
// MemNet does not carry them.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/node"
	"github.com/strand-io/strand/testkit/testutil"
	"github.com/strand-io/strand/testkit/wait"
)

func post(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestFaultEndpointsOnlyWhenSwitchedOn: a node serves the test-only fault
// endpoints only with Config.TestingFaults; with it, a hold is taken by a
// partition's leader only, with a bounded duration, and released.
func TestFaultEndpointsOnlyWhenSwitchedOn(t *testing.T) {
	plain := testutil.FreeAddr(t)
	testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.MetricsListen = plain })
	if code, _ := post(t, "http://"+plain+"/debug/faults/hold-follower-fetch?topic=x&partition=0&duration=1s"); code != http.StatusMethodNotAllowed {
		// Not served: the listener is read-only without TestingFaults.
		t.Errorf("without TestingFaults: %d, want 405", code)
	}

	maddr := testutil.FreeAddr(t)
	n := testutil.StartDev(t, t.TempDir(), func(cfg *node.Config) { cfg.MetricsListen, cfg.TestingFaults = maddr, true })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := client.NewAdmin(client.Bootstrap(n.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if err := adm.CreateTopic(ctx, client.TopicSpec{Name: "f", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	base := "http://" + maddr + "/debug/faults/"
	for q, want := range map[string]int{
		"hold-follower-fetch?topic=f&partition=0&duration=1m":    http.StatusBadRequest,
		"hold-follower-fetch?topic=f&partition=0&duration=x":     http.StatusBadRequest,
		"hold-follower-fetch?partition=0&duration=1s":            http.StatusBadRequest,
		"hold-follower-fetch?topic=none&partition=0&duration=1s": http.StatusConflict,
	} {
		if code, body := post(t, base+q); code != want {
			t.Errorf("POST %s: %d %s, want %d", q, code, body, want)
		}
	}
	var code int
	var body string
	// The new partition's leadership is applied a moment after CreateTopic.
	_ = wait.Until(10*time.Second, "the hold to be accepted", func() bool {
		code, body = post(t, base+"hold-follower-fetch?topic=f&partition=0&duration=5s")
		return code == http.StatusOK
	})
	var fh struct {
		Topic     string
		Partition int32
		Offset    int64
		Until     time.Time
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &fh) != nil || fh.Topic != "f" || fh.Offset != 0 || time.Until(fh.Until) > 5*time.Second {
		t.Fatalf("hold: %d %s", code, body)
	}
	if code, body := post(t, base+"release-follower-fetch?topic=f&partition=0"); code != http.StatusOK || !strings.Contains(body, `"released":true`) {
		t.Errorf("release: %d %s", code, body)
	}
	if resp, err := http.Get(base + "hold-follower-fetch?topic=f&partition=0&duration=1s"); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %v %v, want 405", resp, err)
	} else {
		resp.Body.Close()
	}
}
