// Package story runs protocol stories: text files of commands, each
// followed by a line "----" and the output the command must print. A
// story reads like a worked example of the protocol (offsets, epochs,
// error codes, states), and a test fails when any command prints
// something else.
//
// File format:
//
//	# a comment line (kept as it is on rewrite)
//	produce pid=7 epoch=0 seq=0 n=3
//	optional input lines
//	----
//	offsets 0..2
//
// A command is its first line: a name, then words, key=value pairs or
// key=(a,b,c) lists. The lines up to "----" are its input. The expected
// output runs from "----" to the next blank line (so output has no blank
// lines of its own; the runner refuses to print one). With the test flag
// -rewrite the files are written back with every command's actual output.
package story

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "write each story file back with the output its commands print now")

// Command is one command of a story.
type Command struct {
	Pos      string // file:line of the command
	Name     string
	Words    []string          // arguments without '='
	Args     map[string]string // key=value arguments; a list keeps its parentheses off: "a,b,c"
	Input    string            // lines between the command and "----"
	Expected string

	expFrom, expTo int // the file lines [expFrom, expTo) holding Expected
}

// Has reports whether the command has the argument key.
func (c *Command) Has(key string) bool { _, ok := c.Args[key]; return ok }

// Str is the value of key, or def when it is absent.
func (c *Command) Str(key, def string) string {
	if v, ok := c.Args[key]; ok {
		return v
	}
	return def
}

// Int is the integer value of key, or def when it is absent; a value that
// is not an integer fails the test.
func (c *Command) Int(t T, key string, def int64) int64 {
	t.Helper()
	v, ok := c.Args[key]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s: %s=%q is not an integer", c.Pos, key, v)
	}
	return n
}

// List is the comma-separated values of key (nil when absent).
func (c *Command) List(key string) []string {
	v, ok := c.Args[key]
	if !ok || v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// T is the part of testing.TB RunFile uses.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Parse reads a story's commands; path only names positions.
func Parse(path, text string) ([]*Command, error) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	var out []*Command
	for i := 0; i < len(lines); {
		line := strings.TrimSpace(lines[i])
		if line == "" || strings.HasPrefix(line, "#") {
			i++
			continue
		}
		c := &Command{Pos: fmt.Sprintf("%s:%d", path, i+1), Args: map[string]string{}}
		if err := c.parseLine(line); err != nil {
			return nil, fmt.Errorf("%s: %v", c.Pos, err)
		}
		i++
		var input []string
		for i < len(lines) && lines[i] != "----" {
			if strings.TrimSpace(lines[i]) == "" {
				return nil, fmt.Errorf("%s: command without a \"----\" line", c.Pos)
			}
			input = append(input, lines[i])
			i++
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s: command without a \"----\" line", c.Pos)
		}
		i++ // "----"
		c.expFrom = i
		var exp []string
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
			exp = append(exp, lines[i])
			i++
		}
		c.expTo = i
		c.Input = strings.Join(input, "\n")
		c.Expected = strings.Join(exp, "\n")
		out = append(out, c)
	}
	return out, nil
}

func (c *Command) parseLine(line string) error {
	fields := strings.Fields(line)
	c.Name = fields[0]
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			c.Words = append(c.Words, f)
			continue
		}
		if strings.HasPrefix(v, "(") {
			if !strings.HasSuffix(v, ")") {
				return fmt.Errorf("argument %q: a list is written key=(a,b) without spaces", f)
			}
			v = v[1 : len(v)-1]
		}
		if _, dup := c.Args[k]; dup {
			return fmt.Errorf("argument %q given twice", k)
		}
		c.Args[k] = v
	}
	return nil
}

// RunFile runs the story at path: run is called for each command in order
// and returns what the command printed. A mismatch fails the test (and the
// story goes on, so one run shows every difference); with -rewrite the
// file is written back with the printed output instead.
func RunFile(t T, path string, run func(c *Command) string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := Parse(path, string(raw))
	if err != nil {
		t.Fatal(err)
	}
	// A Recorder runs a story to see it fail: never write that run back.
	_, recording := t.(*Recorder)
	rewriting := *rewrite && !recording
	var rewritten strings.Builder
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	next := 0 // next line of the file not yet copied to rewritten
	for _, c := range cmds {
		got := strings.TrimRight(run(c), "\n")
		for _, l := range strings.Split(got, "\n") {
			if got != "" && strings.TrimSpace(l) == "" {
				t.Fatalf("%s: %s printed a blank line, which would end its output early", c.Pos, c.Name)
			}
		}
		if rewriting {
			rewritten.WriteString(strings.Join(lines[next:c.expFrom], "\n"))
			rewritten.WriteString("\n")
			if got != "" {
				rewritten.WriteString(got + "\n")
			}
			next = c.expTo
			continue
		}
		if got != c.Expected {
			t.Errorf("%s: %s\n--- expected\n%s\n--- got\n%s", c.Pos, c.Name, c.Expected, got)
		}
	}
	if rewriting {
		rest := strings.Join(lines[next:], "\n")
		if rest != "" {
			rewritten.WriteString(rest + "\n")
		}
		if err := os.WriteFile(path, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Walk runs every *.txt story in dir as a subtest named by its file;
// start is called once per story, with the subtest's t, for a fresh world
// and the function that runs the story's commands in it.
func Walk(t *testing.T, dir string, start func(t *testing.T) func(c *Command) string) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no stories in %s", dir)
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txt"), func(t *testing.T) {
			RunFile(t, p, start(t))
		})
	}
}

// Recorder is a T that keeps a story's mismatches (Errorf) instead of
// failing, for a test that shows a story catches a planted bug; Fatal and
// Fatalf still end the test through TB.
type Recorder struct {
	TB     testing.TB
	Errors []string
}

func (r *Recorder) Helper() {}

// Errorf records a mismatch.
func (r *Recorder) Errorf(format string, args ...any) {
	r.Errors = append(r.Errors, fmt.Sprintf(format, args...))
}

// Fatal ends the test.
func (r *Recorder) Fatal(args ...any) { r.TB.Helper(); r.TB.Fatal(args...) }

// Fatalf ends the test.
func (r *Recorder) Fatalf(format string, args ...any) { r.TB.Helper(); r.TB.Fatalf(format, args...) }
