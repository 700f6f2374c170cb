package main

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// Callbacks fail with errors of different concrete types (a broker error,
// a wrapped context error); the tool must keep the first, not panic.
func TestFirstErrorKeepsFirstOfMixedTypes(t *testing.T) {
	var f firstError
	f.set(nil) // ignored
	if f.get() != nil {
		t.Fatalf("empty: %v", f.get())
	}
	first := errors.New("NOT_ENOUGH_REPLICAS")
	f.set(first)
	f.set(fmt.Errorf("wrapped: %w", errors.New("deadline")))
	if f.get() != first {
		t.Fatalf("got %v, want the first error", f.get())
	}

	var g firstError
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				g.set(errors.New("a"))
			} else {
				g.set(fmt.Errorf("b%d", i))
			}
		}()
	}
	wg.Wait()
	if g.get() == nil {
		t.Fatal("no error kept")
	}
}

func TestServerGCPercentYieldsToGOGC(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	if pct, ok := serverGCPercent(get); !ok || pct != defaultServerGOGC {
		t.Fatalf("GOGC unset: got %d %v, want %d true", pct, ok, defaultServerGOGC)
	}
	for _, v := range []string{"50", "off"} {
		env["GOGC"] = v
		if _, ok := serverGCPercent(get); ok {
			t.Fatalf("GOGC=%s: the server overrode the operator's choice", v)
		}
	}
}
