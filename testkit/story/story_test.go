package story

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// counter is a toy world: "add n=K" adds K and prints the total, "echo"
// prints its words, args and input back.
func counter(t T) func(c *Command) string {
	total := 0
	return func(c *Command) string {
		switch c.Name {
		case "add":
			n := c.Int(t, "n", 1)
			total += int(n)
			return fmt.Sprintf("total=%d", total)
		case "echo":
			return fmt.Sprintf("words=%v list=%v x=%s\n%s", c.Words, c.List("l"), c.Str("x", "-"), c.Input)
		}
		return "unknown command " + c.Name
	}
}

const sample = `# a comment
add n=2
----
total=2

echo a b x=1 l=(p,q)
in one
in two
----
words=[a b] list=[p q] x=1
in one
in two

add n=3
----
total=5
`

func TestParse(t *testing.T) {
	cmds, err := Parse("s.txt", sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) != 3 {
		t.Fatalf("%d commands, want 3", len(cmds))
	}
	e := cmds[1]
	if e.Pos != "s.txt:6" || e.Name != "echo" || strings.Join(e.Words, " ") != "a b" || e.Args["x"] != "1" || e.Args["l"] != "p,q" {
		t.Fatalf("echo parsed as %+v", e)
	}
	if e.Input != "in one\nin two" || e.Expected != "words=[a b] list=[p q] x=1\nin one\nin two" {
		t.Fatalf("input %q expected %q", e.Input, e.Expected)
	}
	for _, bad := range []string{"add\n", "add\n\n----\n", "add l=(a,b\n----\n", "add n=1 n=2\n----\n"} {
		if _, err := Parse("b.txt", bad); err == nil {
			t.Errorf("Parse(%q) accepted a malformed story", bad)
		}
	}
}

// recorder is a T that keeps failures instead of failing the test.
type recorder struct{ errs []string }

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatal(a ...any)            { panic(fmt.Sprint(a...)) }
func (r *recorder) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func writeStory(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.txt")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunFilePassesAndFails(t *testing.T) {
	var ok recorder
	RunFile(&ok, writeStory(t, sample), counter(&ok))
	if len(ok.errs) != 0 {
		t.Fatalf("a matching story failed: %v", ok.errs)
	}

	// Change one expected line: exactly that command fails, and the
	// story goes on to the end.
	changed := strings.Replace(sample, "total=5", "total=6", 1)
	var bad recorder
	RunFile(&bad, writeStory(t, changed), counter(&bad))
	if len(bad.errs) != 1 || !strings.Contains(bad.errs[0], "s.txt:14") || !strings.Contains(bad.errs[0], "total=5") {
		t.Fatalf("failures = %q, want one at s.txt:14 showing total=5", bad.errs)
	}
}

func TestRewrite(t *testing.T) {
	stale := strings.Replace(sample, "total=5", "total=999\nan extra stale line", 1)
	stale = strings.Replace(stale, "total=2\n", "", 1) // an empty expectation
	p := writeStory(t, stale)
	*rewrite = true
	defer func() { *rewrite = false }()
	var r recorder
	RunFile(&r, p, counter(&r))
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != sample {
		t.Fatalf("rewritten story:\n%s\nwant:\n%s", got, sample)
	}

	// A run through a Recorder (a story shown to fail) is never written
	// back, even under -rewrite.
	p = writeStory(t, stale)
	RunFile(&Recorder{TB: t}, p, counter(&r))
	if got, _ := os.ReadFile(p); string(got) != stale {
		t.Fatalf("a Recorder run rewrote the story:\n%s", got)
	}
}

func TestBlankLineInOutputIsRefused(t *testing.T) {
	var r recorder
	defer func() {
		if recover() == nil {
			t.Fatal("a command printing a blank line was accepted")
		}
	}()
	RunFile(&r, writeStory(t, "x\n----\n"), func(*Command) string { return "a\n\nb" })
}

func TestWalk(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"one.txt", "two.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(sample), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var started []string
	Walk(t, dir, func(t *testing.T) func(*Command) string {
		started = append(started, t.Name())
		return counter(t) // a fresh world per story: both print total=2 first
	})
	if len(started) != 2 || started[0] != "TestWalk/one" || started[1] != "TestWalk/two" {
		t.Fatalf("stories run: %v", started)
	}
}
