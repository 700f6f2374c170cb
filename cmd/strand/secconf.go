package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strand-io/strand/client"
)

// How the CLI connects: Kafka's client properties from --command-config
// (or $STRAND_COMMAND_CONFIG), the file kafka-topics.sh and its siblings
// take, with the names Kafka's clients use. Every subcommand that
// connects, through the SDK, franz-go (--protocol kafka) or a bare gRPC
// connection, uses it.

// Security protocols, Kafka's security.protocol values.
const (
	protoPlaintext     = "PLAINTEXT"
	protoSSL           = "SSL"
	protoSASLPlaintext = "SASL_PLAINTEXT"
	protoSASLSSL       = "SASL_SSL"
)

// commandConfig is what a command-config file says about connecting.
type commandConfig struct {
	// File is where it came from ("" for none: plaintext).
	File     string
	Protocol string
	// Truststore, Keystore, Key are ssl.truststore.location,
	// ssl.keystore.location and ssl.key.location.
	Truststore, Keystore, Key string
	// Mechanism, Username, Password are SASL's (sasl.mechanism,
	// sasl.username/sasl.password or sasl.jaas.config).
	Mechanism, Username, Password string
	// TLS is the loaded TLS configuration (SSL and SASL_SSL).
	TLS *tls.Config
	// sdkOpts are clientOpts, built once.
	sdkOpts []client.Opt
}

// commandConfigKeys are the properties read; others are refused, so a
// misspelt key does not go unnoticed.
var commandConfigKeys = map[string]bool{
	"security.protocol": true, "ssl.truststore.location": true, "ssl.keystore.location": true, "ssl.key.location": true,
	"sasl.mechanism": true, "sasl.username": true, "sasl.password": true, "sasl.jaas.config": true,
	// Accepted and ignored: PEM is the only store type, and the host name
	// is always checked (Kafka's default "https").
	"ssl.truststore.type": true, "ssl.keystore.type": true, "ssl.endpoint.identification.algorithm": true,
	"client.id": true,
}

// parseProperties reads a Java properties file the way Kafka's tools
// write them: key=value or key: value per line, # and ! comments, a
// trailing backslash continuing the line.
func readProperties(b []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	n, pending, start := 0, "", 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if pending == "" {
			if line == "" || line[0] == '#' || line[0] == '!' {
				continue
			}
			start = n
		}
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`)
			continue
		}
		line, pending = pending+line, ""
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("line %d: %q is not key=value", start, line)
		}
		k, v := strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("line %d: %s is set twice", start, k)
		}
		out[k] = v
	}
	if pending != "" {
		return nil, fmt.Errorf("line %d: the file ends in a continued line", start)
	}
	return out, sc.Err()
}

var jaasRE = regexp.MustCompile(`^\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)((?:\s+[A-Za-z_.]+\s*=\s*"[^"]*")*)\s*;?\s*$`)
var jaasOptRE = regexp.MustCompile(`([A-Za-z_.]+)\s*=\s*"([^"]*)"`)

// parseJAAS reads username and password from a sasl.jaas.config of
// ScramLoginModule or PlainLoginModule.
func parseJAAS(v string) (module, user, pass string, err error) {
	m := jaasRE.FindStringSubmatch(v)
	if m == nil {
		return "", "", "", errors.New(`sasl.jaas.config: want <LoginModule> required username="…" password="…";`)
	}
	module = m[1][strings.LastIndexByte(m[1], '.')+1:]
	if module != "ScramLoginModule" && module != "PlainLoginModule" {
		return "", "", "", fmt.Errorf("sasl.jaas.config: login module %s: only ScramLoginModule and PlainLoginModule are known", m[1])
	}
	for _, o := range jaasOptRE.FindAllStringSubmatch(m[3], -1) {
		switch o[1] {
		case "username":
			user = o[2]
		case "password":
			pass = o[2]
		}
	}
	if user == "" || pass == "" {
		return "", "", "", errors.New("sasl.jaas.config: username and password must both be given")
	}
	return module, user, pass, nil
}

// loadCommandConfig reads and checks a command-config file and loads the
// TLS material it names. path "" is plaintext with no SASL.
func loadCommandConfig(path string) (*commandConfig, error) {
	cc := &commandConfig{File: path, Protocol: protoPlaintext}
	if path == "" {
		return cc, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--command-config: %w", err)
	}
	props, err := readProperties(b)
	if err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	if err := cc.apply(props); err != nil {
		return nil, fmt.Errorf("--command-config %s: %w", path, err)
	}
	return cc, nil
}

func (cc *commandConfig) apply(props map[string]string) error {
	var unknown []string
	for k := range props {
		if !commandConfigKeys[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("unknown properties %s (known: security.protocol, ssl.truststore.location, ssl.keystore.location, ssl.key.location, sasl.mechanism, sasl.username, sasl.password, sasl.jaas.config)",
			strings.Join(unknown, ", "))
	}
	if v, ok := props["security.protocol"]; ok {
		cc.Protocol = strings.ToUpper(v)
	}
	switch cc.Protocol {
	case protoPlaintext, protoSSL, protoSASLPlaintext, protoSASLSSL:
	default:
		return fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", props["security.protocol"])
	}
	if v, ok := props["ssl.truststore.type"]; ok && !strings.EqualFold(v, "PEM") {
		return fmt.Errorf("ssl.truststore.type %q: only PEM is read", v)
	}
	if v, ok := props["ssl.keystore.type"]; ok && !strings.EqualFold(v, "PEM") {
		return fmt.Errorf("ssl.keystore.type %q: only PEM is read", v)
	}
	if v, ok := props["ssl.endpoint.identification.algorithm"]; ok && !strings.EqualFold(v, "https") {
		return fmt.Errorf("ssl.endpoint.identification.algorithm %q: the broker's host name is always checked (https)", v)
	}
	cc.Truststore, cc.Keystore, cc.Key = props["ssl.truststore.location"], props["ssl.keystore.location"], props["ssl.key.location"]
	tlsOn := cc.Protocol == protoSSL || cc.Protocol == protoSASLSSL
	saslOn := cc.Protocol == protoSASLPlaintext || cc.Protocol == protoSASLSSL
	if !tlsOn && (cc.Truststore != "" || cc.Keystore != "" || cc.Key != "") {
		return fmt.Errorf("ssl.* locations are set but security.protocol is %s: set it to SSL or SASL_SSL", cc.Protocol)
	}
	if tlsOn {
		if cc.Key != "" && cc.Keystore == "" {
			return errors.New("ssl.key.location is set without ssl.keystore.location")
		}
		cfg, err := client.LoadTLS(cc.Truststore, cc.Keystore, cc.Key)
		if err != nil {
			return err
		}
		cc.TLS = cfg
	}
	cc.Mechanism = strings.ToUpper(props["sasl.mechanism"])
	cc.Username, cc.Password = props["sasl.username"], props["sasl.password"]
	if j, ok := props["sasl.jaas.config"]; ok {
		if cc.Username != "" || cc.Password != "" {
			return errors.New("give the SASL credentials either as sasl.username/sasl.password or in sasl.jaas.config, not both")
		}
		module, u, p, err := parseJAAS(j)
		if err != nil {
			return err
		}
		cc.Username, cc.Password = u, p
		if cc.Mechanism == "" && module == "PlainLoginModule" {
			cc.Mechanism = "PLAIN"
		}
		if module == "PlainLoginModule" && cc.Mechanism != "PLAIN" || module == "ScramLoginModule" && !strings.HasPrefix(cc.Mechanism, "SCRAM-") && cc.Mechanism != "" {
			return fmt.Errorf("sasl.jaas.config's %s does not go with sasl.mechanism %s", module, cc.Mechanism)
		}
	}
	if !saslOn {
		if cc.Mechanism != "" || cc.Username != "" || cc.Password != "" {
			return fmt.Errorf("SASL settings are given but security.protocol is %s: set it to SASL_SSL or SASL_PLAINTEXT", cc.Protocol)
		}
		return nil
	}
	if cc.Mechanism == "" {
		cc.Mechanism = "GSSAPI" // Kafka's default, which Strand does not offer: say so below
	}
	switch cc.Mechanism {
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
	case "PLAIN":
		if cc.Protocol != protoSASLSSL {
			return errors.New("sasl.mechanism PLAIN sends the password in the clear: use it with security.protocol=SASL_SSL")
		}
	default:
		return fmt.Errorf("sasl.mechanism %q: want SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", cc.Mechanism)
	}
	if cc.Username == "" || cc.Password == "" {
		return errors.New("SASL needs sasl.username and sasl.password (or sasl.jaas.config)")
	}
	return nil
}

// sasl reports whether the connections authenticate with SASL.
func (cc *commandConfig) sasl() bool {
	return cc.Protocol == protoSASLPlaintext || cc.Protocol == protoSASLSSL
}

// describe names the TLS material, for errors.
func (cc *commandConfig) describe() string {
	var parts []string
	if cc.File != "" {
		parts = append(parts, "--command-config "+cc.File)
	}
	if cc.Truststore != "" {
		parts = append(parts, "truststore "+cc.Truststore)
	} else {
		parts = append(parts, "the system's CAs")
	}
	if cc.Keystore != "" {
		parts = append(parts, "keystore "+cc.Keystore)
	}
	return strings.Join(parts, ", ")
}

// clientOpts are the SDK's options for cc.
func (cc *commandConfig) clientOpts() ([]client.Opt, error) {
	var out []client.Opt
	if cc.TLS != nil {
		out = append(out, client.WithTLS(cc.TLS))
	}
	if cc.sasl() {
		o, err := saslOpt(cc)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// saslOpt is the SDK's SASL option for cc: SCRAM through the gRPC
// listeners' session tokens (client.WithSCRAM). PLAIN is served on the
// Kafka listener only.
func saslOpt(cc *commandConfig) (client.Opt, error) {
	if !strings.HasPrefix(cc.Mechanism, "SCRAM-") {
		return nil, fmt.Errorf("sasl.mechanism %s: the gRPC listeners take SCRAM-SHA-256 or SCRAM-SHA-512 (PLAIN only on the Kafka listener: --protocol kafka)", cc.Mechanism)
	}
	return client.WithSCRAM(cc.Mechanism, cc.Username, cc.Password), nil
}

// kgoOpts are franz-go's options for cc.
func (cc *commandConfig) kgoOpts() []kgo.Opt {
	var out []kgo.Opt
	if cc.TLS != nil {
		out = append(out, kgo.DialTLSConfig(cc.TLS.Clone()))
	}
	if cc.sasl() {
		switch cc.Mechanism {
		case "SCRAM-SHA-256":
			out = append(out, kgo.SASL(scram.Auth{User: cc.Username, Pass: cc.Password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			out = append(out, kgo.SASL(scram.Auth{User: cc.Username, Pass: cc.Password}.AsSha512Mechanism()))
		case "PLAIN":
			out = append(out, kgo.SASL(plain.Auth{User: cc.Username, Pass: cc.Password}.AsMechanism()))
		}
	}
	return out
}

// transportCreds are a bare gRPC connection's credentials for cc.
func (cc *commandConfig) transportCreds() credentials.TransportCredentials {
	if cc.TLS != nil {
		return credentials.NewTLS(cc.TLS)
	}
	return insecure.NewCredentials()
}

// security is the command's connection settings, read once by the root
// command before a subcommand runs (plaintext when nothing is given, and
// in tests that call a command's functions directly).
var security = &commandConfig{Protocol: protoPlaintext}

// addCommandConfigFlag adds --command-config to the root command.
func addCommandConfigFlag(root *cobra.Command) {
	root.PersistentFlags().String("command-config", "", "Kafka client properties for connecting: security.protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ssl.truststore.location, ssl.keystore.location, ssl.key.location, sasl.mechanism, sasl.username, sasl.password (default: $STRAND_COMMAND_CONFIG)")
}

// readCommandConfig sets security from --command-config or
// $STRAND_COMMAND_CONFIG.
func readCommandConfig(cmd *cobra.Command) error {
	path, _ := cmd.Flags().GetString("command-config")
	if path == "" {
		path = os.Getenv("STRAND_COMMAND_CONFIG")
	}
	cc, err := loadCommandConfig(path)
	if err != nil {
		return err
	}
	if cc.sdkOpts, err = cc.clientOpts(); err != nil {
		return fmt.Errorf("--command-config %s: %w", path, err)
	}
	security = cc
	return nil
}

// secure adds the command's connection settings to an SDK client's
// options (readCommandConfig has checked that they can be built).
func secure(opts ...client.Opt) []client.Opt {
	return append(opts, security.sdkOpts...)
}

// tlsProbe checks, after a TCP connection to addr was accepted, that a TLS
// handshake with the command's TLS settings succeeds and that the server
// does not refuse the client's certificate right after it. A nil error
// from a server that neither refuses nor answers within a moment: it took
// the certificate and waits for the client to speak first.
func tlsProbe(ctx context.Context, conn net.Conn, addr string) error {
	cfg := security.TLS.Clone()
	// gRPC's servers refuse a TLS client that does not offer HTTP/2.
	cfg.NextProtos = []string{"h2"}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	tc := tls.Client(conn, cfg)
	hctx, cancel := context.WithTimeout(ctx, bootstrapDialTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return tlsError(addr, err)
	}
	tc.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	var one [1]byte
	_, err := tc.Read(one[:])
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	return tlsError(addr, err)
}

// plainProbe checks, after a TCP connection to addr was accepted without
// TLS, that the server is not a TLS one: it sends HTTP/2's preface, which
// a plaintext gRPC server answers at once; a server that hangs up instead
// is asked for a TLS handshake on a second connection, and one that
// completes it is a TLS listener the command has no settings for.
func plainProbe(ctx context.Context, conn net.Conn, addr string) error {
	conn.SetDeadline(time.Now().Add(150 * time.Millisecond))
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		return nil
	}
	var one [1]byte
	if _, err := conn.Read(one[:]); err == nil {
		return nil
	} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: bootstrapDialTimeout}, Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}}
	hctx, cancel := context.WithTimeout(ctx, bootstrapDialTimeout)
	defer cancel()
	tc, err := d.DialContext(hctx, "tcp", addr)
	if err != nil {
		return nil
	}
	tc.Close()
	return fmt.Errorf("%w: %s speaks TLS, and the command connects in plaintext: give it the client properties with --command-config FILE "+
		"(or $STRAND_COMMAND_CONFIG; make certs writes deploy/certs/admin.properties for the compose cluster)", errTLS, addr)
}

// errTLS marks a TLS failure: retrying will not help.
var errTLS = errors.New("TLS")

// tlsError says what failed in a TLS handshake with addr and with which
// files.
func tlsError(addr string, err error) error {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var alert tls.AlertError
	var verr *tls.CertificateVerificationError
	why := err.Error()
	switch {
	case errors.As(err, &unknown):
		why = fmt.Sprintf("its certificate (subject %s, issuer %s) is not signed by a CA of the truststore", unknown.Cert.Subject, unknown.Cert.Issuer)
	case errors.As(err, &host):
		why = fmt.Sprintf("its certificate is not for host %s (%s)", host.Host, host.Error())
	case errors.As(err, &invalid):
		why = fmt.Sprintf("its certificate is invalid: %s", invalid.Error())
	case errors.As(err, &verr):
		why = fmt.Sprintf("its certificate does not verify: %v", verr.Err)
	case errors.As(err, &alert), strings.Contains(why, "remote error: tls:"):
		why = fmt.Sprintf("the broker refused the connection (%s): does it trust the CA of the keystore, is the certificate expired or revoked, or does it need one?", why)
	case strings.Contains(why, "first record does not look like a TLS handshake"):
		why = "the listener does not speak TLS: set security.protocol=PLAINTEXT (or give no --command-config)"
	}
	return fmt.Errorf("%w with %s failed: %s (%s)", errTLS, addr, why, security.describe())
}
