package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// needsBootstrap: commands that talk to the cluster through the bootstrap
// list; the server, dump-log (files), health (--addr), help and shell
// completion do not.
func needsBootstrap(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations["bootstrap"] == "none" {
			return false
		}
		switch c.Name() {
		case "help", "completion", cobra.ShellCompRequestCmd, cobra.ShellCompNoDescRequestCmd:
			return false
		}
	}
	return true
}

// noBootstrap marks a command that needs no bootstrap servers.
func noBootstrap(c *cobra.Command) *cobra.Command {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations["bootstrap"] = "none"
	return c
}

// offline marks a command that connects to no node (the server, dump-log,
// certs): it needs no bootstrap servers and reads no --command-config.
func offline(c *cobra.Command) *cobra.Command {
	noBootstrap(c).Annotations["connects"] = "no"
	return c
}

// connects: the command may connect to a node, so it reads
// --command-config.
func connects(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations["connects"] == "no" {
			return false
		}
	}
	return true
}

// bootstrapDialTimeout bounds one connection attempt: an address that drops
// packets (a stopped container, a host that is down) costs this, not the
// 20 s of a default TCP connect.
const bootstrapDialTimeout = time.Second

// probeBootstrap dials every bootstrap address at once, in rounds, until
// one accepts a TCP connection or wait passes. It returns the addresses with
// the first one that answered in front (the SDK tries them in order), or an
// error naming every address tried and why it failed. A node that accepts
// connections but is still starting is the SDK's to wait for (it answers
// the retriable BROKER_NOT_AVAILABLE); here only "nobody is there" ends
// the command, in seconds instead of a request timeout.
func probeBootstrap(ctx context.Context, addrs []string, wait time.Duration) ([]string, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if len(addrs) == 0 {
		return nil, errors.New("no bootstrap servers: set --bootstrap or STRAND_BOOTSTRAP")
	}
	deadline := time.Now().Add(wait)
	why := make([]error, len(addrs))
	for {
		type result struct {
			i   int
			err error
		}
		results := make(chan result, len(addrs))
		for i, a := range addrs {
			go func() {
				d := net.Dialer{Timeout: bootstrapDialTimeout}
				conn, err := d.DialContext(ctx, "tcp", a)
				if err == nil {
					if security.TLS != nil {
						err = tlsProbe(ctx, conn, a)
					} else {
						err = plainProbe(ctx, conn, a)
					}
					conn.Close()
				}
				results <- result{i, err}
			}()
		}
		for range addrs {
			r := <-results
			if r.err == nil {
				out := append([]string{addrs[r.i]}, addrs[:r.i]...)
				return append(out, addrs[r.i+1:]...), nil
			}
			why[r.i] = r.err
		}
		for _, err := range why {
			if errors.Is(err, errTLS) {
				// A certificate problem does not go away by waiting.
				return nil, err
			}
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
		t := time.NewTimer(min(200*time.Millisecond, time.Until(deadline)))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	tried := make([]string, len(addrs))
	for i, a := range addrs {
		tried[i] = fmt.Sprintf("%s (%s)", a, dialReason(why[i]))
	}
	return nil, fmt.Errorf("no bootstrap server accepted a connection within %v: tried %s; name reachable brokers with --bootstrap or STRAND_BOOTSTRAP",
		wait, strings.Join(tried, ", "))
}

// dialReason is a dial error without the repeated address.
func dialReason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	if err == nil {
		return "no answer"
	}
	return err.Error()
}
