//go:debug randseednop=0

package sim

import (
	"bufio"
	"flag"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "run only this seed (the replay of a failure)")
	seedsFlag = flag.Int("seeds", 0, "fresh seeds to run (default SIM_SEEDS, else 4; -short: 1)")
	firstFlag = flag.Uint64("first-seed", 0, "first fresh seed (default: from the time, printed)")
)

// seedRaft seeds math/rand's global source, which hashicorp/raft and
// memberlist draw their randomised timeouts from (the //go:debug line
// above lets rand.Seed still do that in Go 1.24 and later).
func seedRaft(seed uint64) { rand.Seed(int64(seed)) }

// regressionSeeds are the seeds that once failed, kept in
// testdata/seeds (one per line, # comments).
func regressionSeeds(t *testing.T) []uint64 {
	f, err := os.Open("testdata/seeds")
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		s, err := strconv.ParseUint(strings.Fields(line)[0], 10, 64)
		if err != nil {
			t.Fatalf("testdata/seeds: %q: %v", line, err)
		}
		out = append(out, s)
	}
	return out
}

func runSeed(t *testing.T, seed uint64, sc Scenario) *Outcome {
	t.Helper()
	seedRaft(seed)
	o := Run(t, seed, sc)
	t.Log(o.Summary())
	if o.Failed() {
		t.Errorf("%s", o.ReportText())
	}
	return o
}

// TestSim runs the regression seeds and a batch of fresh ones (or, with
// -seed, one seed: the replay of a failure).
func TestSim(t *testing.T) {
	sc := Scenario{}
	if *seedFlag != 0 {
		runSeed(t, *seedFlag, sc)
		return
	}
	for _, s := range regressionSeeds(t) {
		runSeed(t, s, sc)
	}
	n := *seedsFlag
	if n == 0 {
		if v, err := strconv.Atoi(os.Getenv("SIM_SEEDS")); err == nil {
			n = v
		} else if testing.Short() {
			n = 1
		} else {
			n = 4
		}
	}
	first := *firstFlag
	if first == 0 {
		first = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	t.Logf("fresh seeds %d to %d", first, first+uint64(n)-1)
	start := time.Now()
	var virtual time.Duration
	for i := range uint64(n) {
		o := runSeed(t, first+i, sc)
		virtual += o.Virtual
	}
	el := time.Since(start)
	t.Logf("%d fresh seeds in %.1fs: %.2f seeds/s, %.0fs virtual (%.0fx real time)", n, el.Seconds(), float64(n)/el.Seconds(), virtual.Seconds(), virtual.Seconds()/el.Seconds())
}
