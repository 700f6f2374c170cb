package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/internal/certs"
)

func init() {
	extraCommands = append(extraCommands, func() *cobra.Command { return offline(certsCmd()) })
}

// brokerCN is the subject of every node certificate: all nodes share the
// broker principal User:CN=broker (inter.broker.principals' default).
const brokerCN = "broker"

// certsLayout is what `strand certs` writes under its --out directory.
//
//	ca.pem                  the truststore: the CA certificate
//	gossip.key              memberlist's encryption key (base64 of 32 random bytes)
//	<node>/keystore.pem     a node's keystore: its certificate (CN=broker), the CA, its key
//	<node>/ca.pem           the truststore again, and
//	<node>/gossip.key       the gossip key again: a node's directory is all it mounts
//	<node>/client.properties  --command-config for the CLI inside the node's container
//	                        (its healthcheck), with the paths it sees (--mount-dir)
//	<client>.pem            a client's keystore (CN=<client>)
//	<client>.properties     --command-config for that client, absolute paths
type certsLayout struct {
	out      string
	nodes    []string // host names that are nodes
	common   []string // SANs every node certificate gets (IPs, localhost)
	clients  []string
	days     int
	mountDir string
}

func certsCmd() *cobra.Command {
	var (
		l       certsLayout
		hosts   []string
		force   bool
		clients []string
	)
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make a CA, node and client certificates and the gossip key for a TLS cluster (make certs)",
		Long: `certs makes what a cluster with TLS on every listener needs, as PEM files under --out:
a certificate authority (ca.pem, the truststore), one keystore per node (the node's
certificate, subject CN=broker, then the CA, then its private key: Kafka's PEM keystore), a
keystore per client (CN=<name>, so its principal is User:CN=<name>), and the key memberlist
encrypts gossip with (gossip.key).

Each --hosts entry that is a host name other than localhost is a node: it gets a directory
<name>/ with keystore.pem, ca.pem, gossip.key and client.properties (the CLI's
--command-config inside its container, with paths under --mount-dir); its certificate's
subject alternative names are its name plus every IP address and localhost of --hosts. Every
client gets <name>.pem and <name>.properties (--command-config with absolute paths).

The CA's key is not kept: to add a node or a client, make everything again with --force (and
restart the cluster). certs refuses to overwrite an existing ca.pem without --force.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, h := range hosts {
				for _, one := range strings.Split(h, ",") {
					one = strings.TrimSpace(one)
					switch {
					case one == "":
					case net.ParseIP(one) != nil || one == "localhost":
						l.common = append(l.common, one)
					default:
						if strings.ContainsAny(one, `/\ `) || one == "." || one == ".." {
							return fmt.Errorf("--hosts %q: not a host name", one)
						}
						l.nodes = append(l.nodes, one)
					}
				}
			}
			for _, c := range clients {
				for _, one := range strings.Split(c, ",") {
					if one = strings.TrimSpace(one); one != "" {
						if strings.ContainsAny(one, `/\ =,`) || one == "." || one == ".." {
							return fmt.Errorf("--clients %q: want a plain name (it becomes CN=%s and the file %s.pem)", one, one, one)
						}
						l.clients = append(l.clients, one)
					}
				}
			}
			if len(l.nodes) == 0 {
				return errors.New("--hosts names no node: give the nodes' host names (node1,node2,…) as well as any common IPs and localhost")
			}
			if l.days < 1 {
				return fmt.Errorf("--days %d: want at least 1", l.days)
			}
			if !filepath.IsAbs(l.mountDir) {
				return fmt.Errorf("--mount-dir %q: want an absolute path (the image is FROM scratch: files are mounted at absolute paths)", l.mountDir)
			}
			if _, err := os.Stat(filepath.Join(l.out, "ca.pem")); err == nil && !force {
				return fmt.Errorf("%s already holds a CA (ca.pem): certificates it signed would no longer be trusted; pass --force to replace everything", l.out)
			}
			files, err := l.write()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d files under %s: CA ca.pem; nodes (CN=%s) %s; clients %s; gossip.key\n",
				len(files), l.out, brokerCN, strings.Join(l.nodes, ", "), strings.Join(l.clients, ", "))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&l.out, "out", "deploy/certs", "directory to write into (created)")
	f.StringSliceVar(&hosts, "hosts", []string{"node1", "node2", "node3", "node4", "localhost", "127.0.0.1"}, "nodes' host names, and the IPs and localhost every node certificate also carries")
	f.StringSliceVar(&clients, "clients", []string{"admin", "verify"}, "clients to make keystores for (CN=<name>)")
	f.IntVar(&l.days, "days", 365, "validity of the node and client certificates in days (the CA: ten times that)")
	f.StringVar(&l.mountDir, "mount-dir", "/etc/strand/tls", "where a node's directory is mounted in its container (the paths of <node>/client.properties)")
	f.BoolVar(&force, "force", false, "replace an existing CA and everything it signed")
	return cmd
}

// write makes the CA and everything it signs and writes them; it returns
// the files written.
func (l *certsLayout) write() ([]string, error) {
	abs, err := filepath.Abs(l.out)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	life := time.Duration(l.days) * 24 * time.Hour
	ca, err := certs.NewCA("Strand CA "+now.UTC().Format("2006-01-02T15:04:05Z"), now.Add(-time.Hour), now.Add(10*life))
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	gossipKey := []byte(base64.StdEncoding.EncodeToString(key) + "\n")
	// Every file is written to a temporary name and renamed, so a node
	// that reloads its files never reads half of one.
	var written []string
	put := func(rel string, data []byte, mode fs.FileMode) error {
		p := filepath.Join(abs, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, data, mode); err != nil {
			return err
		}
		// WriteFile's mode is cut by the umask; the nodes' files must be
		// readable by the container's user (uid 10001), who is not the
		// host user that owns them.
		if err := os.Chmod(tmp, mode); err != nil {
			return err
		}
		if err := os.Rename(tmp, p); err != nil {
			return err
		}
		written = append(written, p)
		return nil
	}
	caPEM := ca.CertPEM()
	for _, n := range l.nodes {
		pair, err := ca.Issue(certs.Spec{CommonName: brokerCN, Hosts: append([]string{n}, l.common...), Server: true, Client: true,
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(life)})
		if err != nil {
			return nil, err
		}
		in := func(f string) string { return filepath.ToSlash(filepath.Join(l.mountDir, f)) }
		props := fmt.Sprintf("# strand --command-config inside %s's container (its healthcheck): the node's own certificate\n"+
			"security.protocol=SSL\nssl.truststore.location=%s\nssl.keystore.location=%s\n", n, in("ca.pem"), in("keystore.pem"))
		for _, f := range []struct {
			name string
			data []byte
		}{{"keystore.pem", pair.KeystorePEM()}, {"ca.pem", caPEM}, {"gossip.key", gossipKey}, {"client.properties", []byte(props)}} {
			if err := put(filepath.Join(n, f.name), f.data, 0o644); err != nil {
				return nil, err
			}
		}
	}
	for _, c := range l.clients {
		pair, err := ca.Issue(certs.Spec{CommonName: c, Client: true, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(life)})
		if err != nil {
			return nil, err
		}
		if err := put(c+".pem", pair.KeystorePEM(), 0o600); err != nil {
			return nil, err
		}
		props := fmt.Sprintf("# strand --command-config for %s (principal User:CN=%s)\n"+
			"security.protocol=SSL\nssl.truststore.location=%s\nssl.keystore.location=%s\n", c, c, filepath.Join(abs, "ca.pem"), filepath.Join(abs, c+".pem"))
		if err := put(c+".properties", []byte(props), 0o644); err != nil {
			return nil, err
		}
	}
	if err := put("gossip.key", gossipKey, 0o644); err != nil {
		return nil, err
	}
	// The CA last: its presence says the set is whole.
	if err := put("ca.pem", caPEM, 0o644); err != nil {
		return nil, err
	}
	return written, nil
}
