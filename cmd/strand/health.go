package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func init() {
	extraCommands = append(extraCommands, healthCmd)
}

// healthCmd asks a node's gRPC health service whether it serves: SERVING
// once its broker is registered, unfenced and caught up with metadata (a
// controller-only node: once it knows the active controller and has caught
// up with the metadata log); NOT_SERVING before, while the node refuses
// client requests as starting. It is what container healthchecks and
// scripts run.
func healthCmd() *cobra.Command {
	var addr string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 when the node at --addr serves (with --wait, poll until it does)",
		RunE: func(cmd *cobra.Command, args []string) error {
			if addr == "" {
				addr = bootstrap(cmd)[0]
			}
			deadline := time.Now().Add(wait)
			for {
				err := checkHealth(addr)
				if err == nil {
					return nil
				}
				if time.Now().After(deadline) {
					return err
				}
				time.Sleep(200 * time.Millisecond)
			}
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "node to ask (default: the first --bootstrap)")
	cmd.Flags().DurationVar(&wait, "wait", 0, "keep asking for this long")
	return cmd
}

func checkHealth(addr string) error {
	cc, err := dial(addr)
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	if r.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s: %s", addr, r.Status)
	}
	return nil
}
