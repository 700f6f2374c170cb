// Package wait is the test kit's one way to wait for a condition: poll it
// on a short interval until it holds or a timeout passes, then fail saying
// what was awaited (and, for the error forms, the last error seen). Tests
// use it instead of sleeping a guessed duration.
//
// The package imports nothing of the project, so a test of any package
// (even one the rest of testkit imports) can use it without an import cycle.
package wait

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Interval is how often a condition is polled.
const Interval = 5 * time.Millisecond

// errNotYet is the last error of a boolean condition that never held.
var errNotYet = errors.New("the condition never held")

// poll calls cond every Interval until it returns nil or timeout passes.
func poll(timeout time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s: %w", timeout, what, err)
		}
		<-tick.C
	}
}

func boolCond(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}
}

// Eventually fails t (t.Fatal) unless cond returns true within timeout;
// what says what is awaited. Call it from the test's goroutine (t.Fatal's
// rule); elsewhere use Until.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := poll(timeout, what, boolCond(cond)); err != nil {
		t.Fatal(err)
	}
}

// EventuallyNil fails t unless f returns nil within timeout; the failure
// carries f's last error.
func EventuallyNil(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	if err := poll(timeout, what, f); err != nil {
		t.Fatal(err)
	}
}

// Until is Eventually returning an error instead of failing a test: nil
// once cond holds, or an error naming what was awaited and the timeout. It
// does not touch a testing.TB, so it is safe from any goroutine.
func Until(timeout time.Duration, what string, cond func() bool) error {
	return poll(timeout, what, boolCond(cond))
}

// UntilNil is EventuallyNil returning an error that wraps f's last error.
func UntilNil(timeout time.Duration, what string, f func() error) error {
	return poll(timeout, what, f)
}
