package planted

import (
	"strings"
	"testing"
)

func TestSetAndRestore(t *testing.T) {
	for _, b := range All() {
		if On(b) {
			t.Fatalf("%s is on without being set", b)
		}
		restore := Set(b)
		if !On(b) {
			t.Fatalf("%s is off after Set", b)
		}
		for _, other := range All() {
			if other != b && On(other) {
				t.Fatalf("setting %s turned on %s", b, other)
			}
		}
		restore()
		if On(b) {
			t.Fatalf("%s is still on after restore", b)
		}
	}
}

func TestParse(t *testing.T) {
	got, err := Parse(" marker-retry-unreplicated,,serve-before-ready ")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != MarkerRetryUnreplicated || got[1] != ServeBeforeReady {
		t.Fatalf("Parse = %v", got)
	}
	if _, err := Parse("marker-retry"); err == nil {
		t.Fatal("a misspelt name was accepted")
	}
	for _, b := range All() {
		if got, err := Parse(b.String()); err != nil || len(got) != 1 || got[0] != b {
			t.Fatalf("%s does not parse back: %v %v", b, got, err)
		}
	}
}

// TestReleaseBuildRefusesTheEnvironment: a binary built without the tag
// reads no switch from STRAND_PLANTED_BUGS and refuses to serve when it is
// set; one built with the tag takes it.
func TestReleaseBuildRefusesTheEnvironment(t *testing.T) {
	for _, v := range []string{"", "  "} {
		if err := checkEnv(false, v); err != nil {
			t.Fatalf("%s=%q refused: %v", EnvVar, v, err)
		}
	}
	for _, v := range []string{"marker-retry-unreplicated", "no-such-bug"} {
		err := checkEnv(false, v)
		if err == nil {
			t.Fatalf("a release binary accepted %s=%s", EnvVar, v)
		}
		for _, want := range []string{EnvVar, v, "carries no planted bugs", "-tags planted"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("the refusal does not say %q: %v", want, err)
			}
		}
		if err := checkEnv(true, v); err != nil {
			t.Fatalf("a binary built with the tag refused %s=%s: %v", EnvVar, v, err)
		}
	}
	if Built {
		t.Skip("built with -tags planted: the environment was read at init")
	}
	t.Setenv(EnvVar, "marker-retry-unreplicated")
	if CheckEnv() == nil {
		t.Fatal("CheckEnv accepted the variable in a binary built without the tag")
	}
	if len(Active()) != 0 {
		t.Fatalf("switches on in a test binary built without the tag: %v", Active())
	}
}

func TestFromEnv(t *testing.T) {
	if err := fromEnv("no-such-bug"); err == nil || !strings.Contains(err.Error(), EnvVar) {
		t.Fatalf("a misspelt switch: %v", err)
	}
	prev := on.Swap(0)
	t.Cleanup(func() { on.Store(prev) })
	if err := fromEnv("serve-before-ready, client-markers-accepted"); err != nil {
		t.Fatal(err)
	}
	if got := Active(); len(got) != 2 || got[0] != ServeBeforeReady || got[1] != ClientMarkersAccepted {
		t.Fatalf("Active = %v", got)
	}
}

// TestSetOnlyInTests: Set works in this test binary, and the check behind
// it panics in any other.
func TestSetOnlyInTests(t *testing.T) {
	mustBeTest(true)
	defer func() {
		if recover() == nil {
			t.Fatal("outside a test binary the check did not panic")
		}
	}()
	mustBeTest(false)
}
