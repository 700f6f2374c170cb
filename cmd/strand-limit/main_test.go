//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestMain lets the test binary play the roles the orchestrator starts
// (it runs os.Executable with a role argument).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "producer", "leader", "follower":
			os.Exit(dispatch(os.Args[1:], os.Stdout))
		}
	}
	os.Exit(m.Run())
}

// readLog concatenates a replica's segment files in order.
func readLog(t *testing.T, dir string) []byte {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var all []byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// A short run: every acknowledged byte is in the leader's and both
// followers' files, each frame with the right CRC-32C and offset, and the
// JSON figures are sane.
func TestRunReplicatesEveryAckedBatch(t *testing.T) {
	const batch, record = 16 << 10, 1024
	var out bytes.Buffer
	// Small segments with retention off: the run rolls several and keeps them all.
	args := []string{"-batch", "16k", "-duration", "1s", "-batches", "1000", "-segment", "1m", "-retain", "0",
		"-keep", "-dir", t.TempDir(), "-sync=false"}
	if rc := orchestrate(args, &out); rc != 0 {
		t.Fatalf("exit %d", rc)
	}
	var s Summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if s.Batches <= 0 || s.PayloadBytes != s.Batches*batch || s.MBps <= 0 || s.RecordsPerS <= 0 ||
		s.P50AckMs <= 0 || s.P99AckMs < s.P50AckMs || s.BrokerCPUPerGB <= 0 || s.CPULeader <= 0 || s.CPUFollowers <= 0 ||
		s.FramesPerGroup < 1 || s.DataDir == "" {
		t.Fatalf("implausible summary: %+v", s)
	}
	leader := readLog(t, filepath.Join(s.DataDir, "leader"))
	if want := s.Batches * (batch + headerLen); int64(len(leader)) != want {
		t.Fatalf("leader holds %d bytes, want %d", len(leader), want)
	}
	next, err := checkFrames(leader, 0, record)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(s.Batches * batch / record); next != want {
		t.Fatalf("leader's log ends at offset %d, want %d", next, want)
	}
	if segs, _ := filepath.Glob(filepath.Join(s.DataDir, "leader", "*.log")); len(segs) < 2 {
		t.Fatalf("%d segments: the run did not roll", len(segs))
	}
	for _, f := range []string{"follower1", "follower2"} {
		if got := readLog(t, filepath.Join(s.DataDir, f)); !bytes.Equal(got, leader) {
			t.Fatalf("%s's log (%d bytes) differs from the leader's (%d bytes)", f, len(got), len(leader))
		}
	}
}

// The check the test relies on fails on a flipped payload bit, a wrong
// offset, and a torn tail.
func TestCheckFramesCatchesDamage(t *testing.T) {
	frame := func(off uint64) []byte {
		b := make([]byte, headerLen+2048)
		for i := headerLen; i < len(b); i++ {
			b[i] = byte(i * 7)
		}
		binary.LittleEndian.PutUint32(b, 2048)
		binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[headerLen:], castagnoli))
		binary.LittleEndian.PutUint64(b[8:], off)
		return b
	}
	good := append(frame(0), frame(2)...)
	if next, err := checkFrames(good, 0, 1024); err != nil || next != 4 {
		t.Fatalf("good log: next %d, %v", next, err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1
	gap := append(frame(0), frame(3)...)
	for name, b := range map[string][]byte{"flipped bit": flipped, "offset gap": gap, "torn tail": good[:len(good)-1]} {
		if _, err := checkFrames(b, 0, 1024); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
