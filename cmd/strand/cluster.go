package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Cluster membership commands: `strand cluster describe
// --status|--replication` in kafka-metadata-quorum describe's shapes,
// `strand cluster add-voter|remove-voter` (kafka-metadata-quorum
// add-controller / remove-controller), `strand cluster unregister-broker`
// (kafka-cluster unregister).

// zeroDirectoryID is Kafka's Uuid.ZERO as it prints it: Strand keeps no
// directory ids.
const zeroDirectoryID = "AAAAAAAAAAAAAAAAAAAAAA"

// addMembersCommands adds the membership subcommands to `strand cluster`
// and the --status / --replication views to its describe.
func addMembersCommands(cluster, describe *cobra.Command) {
	var status, replication bool
	describe.Flags().BoolVar(&status, "status", false, "the controller quorum's status (kafka-metadata-quorum describe --status)")
	describe.Flags().BoolVar(&replication, "replication", false, "each metadata log replica's state (kafka-metadata-quorum describe --replication)")
	plain := describe.RunE
	describe.RunE = func(cmd *cobra.Command, args []string) error {
		if !status && !replication {
			return plain(cmd, args)
		}
		return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
			q, err := adm.DescribeQuorum(ctx)
			if err != nil {
				return err
			}
			now := time.Now().UnixMilli()
			if status {
				printQuorumStatus(os.Stdout, q, now)
			}
			if replication {
				if status {
					fmt.Println()
				}
				return printQuorumReplication(os.Stdout, q)
			}
			return nil
		})
	}

	var addID int32
	var addAddr string
	add := &cobra.Command{
		Use:   "add-voter",
		Short: "Make a running controller node a voter of the controller quorum (kafka-metadata-quorum add-controller)",
		Long: `Make a running controller node a voter of the controller quorum.

A new controller node starts with --roles controller (or broker,controller)
and a --controller-voters list that does not name it: it bootstraps nothing
and waits. add-voter, sent to any broker, has the active controller add it
to the Raft configuration; the node then receives the metadata log and votes.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if addID < 0 || addAddr == "" {
				return fmt.Errorf("--node-id and --address (the node's controller listener, host:port) are required")
			}
			return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
				if err := adm.AddVoter(ctx, addID, addAddr); err != nil {
					return err
				}
				fmt.Printf("Added controller %d with directory id %s and endpoints: CONTROLLER://%s\n", addID, zeroDirectoryID, addAddr)
				return nil
			})
		},
	}
	add.Flags().Int32Var(&addID, "node-id", -1, "the new voter's node id")
	add.Flags().StringVar(&addAddr, "address", "", "the new voter's controller (Raft) listener, host:port")

	var rmID int32
	rm := &cobra.Command{
		Use:   "remove-voter",
		Short: "Remove a voter from the controller quorum (kafka-metadata-quorum remove-controller)",
		Long: `Remove a voter from the controller quorum (the last one cannot be removed).

The node is being retired: stop it afterwards. A node with both roles reads
its broker's metadata from its own Raft log, which stops growing once it is
no voter, so its broker would fall behind.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if rmID < 0 {
				return fmt.Errorf("--node-id is required")
			}
			return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
				if err := adm.RemoveVoter(ctx, rmID); err != nil {
					return err
				}
				fmt.Printf("Removed KRaft controller %d with directory id %s\n", rmID, zeroDirectoryID)
				return nil
			})
		},
	}
	rm.Flags().Int32Var(&rmID, "node-id", -1, "the voter's node id")

	var unID int32
	un := &cobra.Command{
		Use:   "unregister-broker",
		Short: "Remove a broker's registration (kafka-cluster unregister)",
		Long: `Remove a broker's registration: the controller fences it (it leaves every ISR,
its leaderships move) and removes it from the metadata. Its replicas stay in
the partitions' replica lists. A broker still running registers again at its
next heartbeat: unregister brokers that are gone for good.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if unID < 0 {
				return fmt.Errorf("--id is required")
			}
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				if err := adm.UnregisterBroker(ctx, unID); err != nil {
					return err
				}
				fmt.Printf("Broker %d is no longer registered.\n", unID)
				return nil
			})
		},
	}
	un.Flags().Int32Var(&unID, "id", -1, "the broker's id")
	cluster.AddCommand(add, rm, un)
}

// printQuorumStatus writes kafka-metadata-quorum describe --status.
func printQuorumStatus(w io.Writer, q *pb.QuorumStatusResponse, now int64) {
	var maxLag, maxLagMs int64
	for _, v := range q.Voters {
		if v.NodeId == q.LeaderId {
			continue
		}
		if lag := q.HighWatermark - v.LogEndOffset; v.LogEndOffset >= 0 && lag > maxLag {
			maxLag = lag
		}
		if v.LastCaughtUpTimestampMs >= 0 {
			if d := now - v.LastCaughtUpTimestampMs; d > maxLagMs {
				maxLagMs = d
			}
		}
	}
	nodes := func(rs []*pb.QuorumReplica, endpoints bool) string {
		var parts []string
		for _, r := range rs {
			s := fmt.Sprintf(`{"id": %d, "directoryId": "%s"`, r.NodeId, zeroDirectoryID)
			if endpoints && r.Address != "" {
				s += fmt.Sprintf(`, "endpoints": ["CONTROLLER://%s"]`, r.Address)
			}
			parts = append(parts, s+"}")
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	line := func(k string, v any) { fmt.Fprintf(w, "%-24s%v\n", k+":", v) }
	line("ClusterId", q.ClusterId)
	line("LeaderId", q.LeaderId)
	line("LeaderEpoch", q.LeaderEpoch)
	line("HighWatermark", q.HighWatermark)
	line("MaxFollowerLag", maxLag)
	line("MaxFollowerLagTimeMs", maxLagMs)
	line("CurrentVoters", nodes(q.Voters, true))
	line("CurrentObservers", nodes(q.Observers, false))
}

// printQuorumReplication writes kafka-metadata-quorum describe
// --replication: the leader first, then the followers, then the observers.
func printQuorumReplication(w io.Writer, q *pb.QuorumStatusResponse) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NodeId\tDirectoryId\tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus")
	row := func(r *pb.QuorumReplica, status string) {
		lag := "-1"
		if r.LogEndOffset >= 0 {
			lag = fmt.Sprint(max(q.HighWatermark-r.LogEndOffset, 0))
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%d\t%s\n", r.NodeId, zeroDirectoryID, r.LogEndOffset, lag, r.LastFetchTimestampMs, r.LastCaughtUpTimestampMs, status)
	}
	for _, v := range q.Voters {
		if v.NodeId == q.LeaderId {
			row(v, "Leader")
		}
	}
	for _, v := range q.Voters {
		if v.NodeId != q.LeaderId {
			row(v, "Follower")
		}
	}
	for _, o := range q.Observers {
		row(o, "Observer")
	}
	return tw.Flush()
}
