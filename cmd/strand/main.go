// Command strand is Strand's single binary: the server and the tools.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/strand-io/strand/client"
)

func main() {
	root := &cobra.Command{
		Use:           "strand",
		Short:         "Strand: a replicated commit log with Kafka's exactly-once semantics",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("bootstrap", "", "brokers to connect to, host:port[,host:port…] (default: $STRAND_BOOTSTRAP, else make run's three nodes "+defaultBootstrap+")")
	root.PersistentFlags().Duration("bootstrap-wait", 5*time.Second, "how long to wait for one of the bootstrap servers to accept a connection")
	addCommandConfigFlag(root)
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		if connects(cmd) {
			if err := readCommandConfig(cmd); err != nil {
				return err
			}
		}
		if !needsBootstrap(cmd) {
			return nil
		}
		wait, _ := cmd.Flags().GetDuration("bootstrap-wait")
		addrs, err := probeBootstrap(cmd.Context(), bootstrapList(cmd), wait)
		if err != nil {
			return err
		}
		resolvedBootstrap = addrs
		return nil
	}
	root.AddCommand(offline(serverCmd()), topicsCmd(), produceCmd(), consumeCmd(), offline(dumpLogCmd()), clusterCmd(), featuresCmd(), configsCmd())
	for _, c := range extraCommands {
		root.AddCommand(c())
	}
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strand:", err)
		os.Exit(1)
	}
}

// extraCommands lets other files add commands.
var extraCommands []func() *cobra.Command

// defaultBootstrap is the cluster scripts/run.sh (make run) starts.
const defaultBootstrap = "127.0.0.1:9097,127.0.0.1:9107,127.0.0.1:9117"

// resolvedBootstrap is the bootstrap list after probing, the servers that
// accepted a connection first.
var resolvedBootstrap []string

// bootstrap is the list of servers to give the SDK.
func bootstrap(cmd *cobra.Command) []string {
	if resolvedBootstrap != nil {
		return resolvedBootstrap
	}
	return bootstrapList(cmd)
}

// bootstrapList is --bootstrap, else $STRAND_BOOTSTRAP, else the three
// nodes of make run.
func bootstrapList(cmd *cobra.Command) []string {
	v, _ := cmd.Flags().GetString("bootstrap")
	if v == "" {
		v = os.Getenv("STRAND_BOOTSTRAP")
	}
	if strings.TrimSpace(v) == "" {
		v = defaultBootstrap
	}
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func timeoutContext(cmd *cobra.Command, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signalContext()
	ctx2, cancel := context.WithTimeout(ctx, d)
	return ctx2, func() { cancel(); stop() }
}

func newAdmin(cmd *cobra.Command) (*client.Admin, error) {
	return client.NewAdmin(secure(client.Bootstrap(bootstrap(cmd)...))...)
}

// envDefaults sets each flag not given on the command line from STRAND_<NAME>.
func envDefaults(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		name := "STRAND_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, e)
			}
		}
	})
	return err
}

// withAdmin runs fn with an admin client and a context bounded by d (and
// by Ctrl-C).
func withAdmin(cmd *cobra.Command, d time.Duration, fn func(ctx context.Context, adm *client.Admin) error) error {
	ctx, cancel := timeoutContext(cmd, d)
	defer cancel()
	adm, err := newAdmin(cmd)
	if err != nil {
		return err
	}
	defer adm.Close()
	return fn(ctx, adm)
}
