package planted

import "testing"

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
