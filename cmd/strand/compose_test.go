package main

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/node"
)

// composeTools are the Compose implementations on this machine: docker
// compose (v2+) and docker-compose (v1).
func composeTools() [][]string {
	var out [][]string
	if exec.Command("docker", "compose", "version").Run() == nil {
		out = append(out, []string{"docker", "compose"})
	}
	if _, err := exec.LookPath("docker-compose"); err == nil {
		out = append(out, []string{"docker-compose"})
	}
	return out
}

// The compose file's host ports can be moved with STRAND_NODE<N>_KAFKA_PORT,
// STRAND_NODE<N>_PORT and STRAND_NODE<N>_METRICS_PORT (each node
// advertising its moved Kafka and gRPC ports), and stay at 19092 (Kafka),
// 19097 (gRPC), 19095 (metrics)… by default, under both docker compose and
// docker-compose v1. `config` only renders the file: nothing starts.
func TestComposeHostPortsOverridable(t *testing.T) {
	tools := composeTools()
	if len(tools) == 0 {
		t.Skip("neither docker compose nor docker-compose is installed")
	}
	file := filepath.Join("..", "..", "deploy", "docker-compose.yml")
	render := func(t *testing.T, tool []string, env ...string) string {
		t.Helper()
		args := append(append([]string{}, tool[1:]...), "-p", "strand-config-test", "-f", file, "config")
		cmd := exec.Command(tool[0], args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s config: %v\n%s", strings.Join(tool, " "), err, out)
		}
		return string(out)
	}
	for _, tool := range tools {
		t.Run(strings.Join(tool, "-"), func(t *testing.T) {
			def := render(t, tool)
			// Each published and advertised: the Kafka listeners, then the gRPC ones.
			for _, want := range []string{"127.0.0.1:19092", "127.0.0.1:29092", "127.0.0.1:39092", "127.0.0.1:19097", "127.0.0.1:29097", "127.0.0.1:39097"} {
				if strings.Count(def, want) < 2 {
					t.Errorf("default rendering lacks %s twice:\n%s", want, def)
				}
			}
			moved := render(t, tool, "STRAND_NODE1_KAFKA_PORT=41092", "STRAND_NODE2_KAFKA_PORT=42092", "STRAND_NODE3_KAFKA_PORT=43092",
				"STRAND_NODE1_PORT=41097", "STRAND_NODE2_PORT=42097", "STRAND_NODE3_PORT=43097",
				"STRAND_NODE1_METRICS_PORT=41095", "STRAND_NODE2_METRICS_PORT=42095", "STRAND_NODE3_METRICS_PORT=43095")
			for _, port := range []string{"41092", "42092", "43092", "41097", "42097", "43097", "41095", "42095", "43095"} {
				if !strings.Contains(moved, "127.0.0.1:"+port) {
					t.Errorf("with STRAND_NODE*_PORT set, no host port %s:\n%s", port, moved)
				}
			}
			for _, old := range []string{"127.0.0.1:19092", "127.0.0.1:29097", "127.0.0.1:29095", "127.0.0.1:39092"} {
				if strings.Contains(moved, old) {
					t.Errorf("with the ports moved, %s is still there:\n%s", old, moved)
				}
			}
			for _, port := range []string{"42092", "42097"} {
				if strings.Count(moved, "127.0.0.1:"+port) < 2 {
					t.Errorf("node 2 does not advertise its moved port %s:\n%s", port, moved)
				}
			}
		})
	}
}

// deploy/docker-compose.grow.yml over the compose file renders a fourth,
// broker-only node joining the three by gossip, with its host ports and
// its roles overridable; `config` only renders: nothing starts.
func TestComposeGrowFile(t *testing.T) {
	tools := composeTools()
	if len(tools) == 0 {
		t.Skip("neither docker compose nor docker-compose is installed")
	}
	base := filepath.Join("..", "..", "deploy", "docker-compose.yml")
	grow := filepath.Join("..", "..", "deploy", "docker-compose.grow.yml")
	for _, tool := range tools {
		t.Run(strings.Join(tool, "-"), func(t *testing.T) {
			render := func(env ...string) string {
				args := append(append([]string{}, tool[1:]...), "-p", "strand-config-test", "-f", base, "-f", grow, "config")
				cmd := exec.Command(tool[0], args...)
				cmd.Env = append(os.Environ(), env...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s config: %v\n%s", strings.Join(tool, " "), err, out)
				}
				return string(out)
			}
			out := render()
			for _, want := range []string{"node4:", "STRAND_ROLES: broker", "node1:9094,node2:9094,node3:9094", "127.0.0.1:49092", "127.0.0.1:49097", "node4-data", "node1:"} {
				if !strings.Contains(out, want) {
					t.Errorf("grow rendering lacks %q:\n%s", want, out)
				}
			}
			out = render("STRAND_NODE4_ROLES=broker,controller", "STRAND_NODE4_KAFKA_PORT=45092")
			for _, want := range []string{"STRAND_ROLES: broker,controller", "127.0.0.1:45092"} {
				if !strings.Contains(out, want) {
					t.Errorf("grow rendering with overrides lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// confSettings reads a server config file's key: value lines.
func confSettings(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("%s: %q is not key: value", path, line)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

// The compose cluster runs with TLS on by default: both server configs map
// every listener to SSL with client certificates required and gossip
// encrypted, naming files under the directory each node mounts, which
// are the files strand certs writes for a node; every node (node4 of the
// grow file too) mounts its own deploy/certs/nodeN read-only there and
// runs its healthcheck with the node's client.properties; the scripts
// that bring compose up make the certificates first and hand the CLI its
// --command-config.
func TestComposeTLSByDefault(t *testing.T) {
	const mount = "/etc/strand/tls"
	certsOut := filepath.Join(t.TempDir(), "certs")
	if _, err := runCerts(t, "--out", certsOut, "--hosts", "node1,localhost"); err != nil {
		t.Fatal(err)
	}
	for _, conf := range []string{"server.conf", "server.drill.conf"} {
		s := confSettings(t, filepath.Join("..", "..", "deploy", conf))
		want := map[string]string{
			"listener.security.protocol.map": "CLIENT:SSL,EXTERNAL:SSL,KAFKA:SSL,INTER_BROKER:SSL,CONTROLLER:SSL,HTTP:SSL",
			"ssl.client.auth":                "required",
			"ssl.keystore.location":          mount + "/keystore.pem",
			"ssl.truststore.location":        mount + "/ca.pem",
			"gossip.encryption.key.location": mount + "/gossip.key",
		}
		for k, v := range want {
			if s[k] != v {
				t.Errorf("%s: %s = %q, want %q", conf, k, s[k], v)
			}
			if strings.HasSuffix(k, ".location") {
				if _, err := os.Stat(filepath.Join(certsOut, "node1", strings.TrimPrefix(v, mount+"/"))); err != nil {
					t.Errorf("%s: %s names a file strand certs does not write into a node's directory: %v", conf, k, err)
				}
			}
		}
	}
	props := string(mustRead(t, filepath.Join(certsOut, "node1", "client.properties")))
	if !strings.Contains(props, "ssl.keystore.location="+mount+"/keystore.pem") {
		t.Errorf("node1/client.properties does not use the mounted paths:\n%s", props)
	}

	yml := func(name string) string { return string(mustRead(t, filepath.Join("..", "..", "deploy", name))) }
	base, grow := yml("docker-compose.yml"), yml("docker-compose.grow.yml")
	for n, file := range map[string]string{"1": base, "2": base, "3": base, "4": grow} {
		if !strings.Contains(file, `"./certs/node`+n+`:`+mount+`:ro"`) {
			t.Errorf("node%s does not mount deploy/certs/node%s read-only at %s", n, n, mount)
		}
	}
	for name, file := range map[string]string{"docker-compose.yml": base, "docker-compose.grow.yml": grow} {
		if !strings.Contains(file, `STRAND_COMMAND_CONFIG: "`+mount+`/client.properties"`) {
			t.Errorf("%s: the healthcheck's strand health gets no STRAND_COMMAND_CONFIG", name)
		}
	}
	drill := string(mustRead(t, filepath.Join("..", "..", "scripts", "drill.sh")))
	for _, want := range []string{"make -s certs", "--command-config deploy/certs/verify.properties", "--command-config deploy/certs/admin.properties"} {
		if !strings.Contains(drill, want) {
			t.Errorf("scripts/drill.sh lacks %q", want)
		}
	}
	mk := string(mustRead(t, filepath.Join("..", "..", "Makefile")))
	if !strings.Contains(mk, "\ncerts: build") || !strings.Contains(mk, "\ngrow: certs") {
		t.Error("Makefile: want a certs target and grow depending on it")
	}
	if ig := string(mustRead(t, filepath.Join("..", "..", ".gitignore"))); !strings.Contains(ig, "deploy/certs/") {
		t.Error(".gitignore does not ignore deploy/certs/")
	}

	// Rendered, where Compose is installed: the drill file over the base
	// keeps each node's TLS mount.
	for _, tool := range composeTools() {
		args := append(append([]string{}, tool[1:]...), "-p", "strand-config-test", "-f", filepath.Join("..", "..", "deploy", "docker-compose.yml"),
			"-f", filepath.Join("..", "..", "deploy", "docker-compose.drill.yml"), "config")
		out, err := exec.Command(tool[0], args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s config: %v\n%s", strings.Join(tool, " "), err, out)
		}
		for _, n := range []string{"1", "2", "3"} {
			if !strings.Contains(string(out), "certs/node"+n+":"+mount+":ro") {
				t.Errorf("%s: with the drill file, node%s lost its TLS mount:\n%s", strings.Join(tool, " "), n, out)
			}
		}
	}
}

// The drill cluster runs with ACLs on: server.drill.conf sets
// the StandardAuthorizer with nothing allowed without an ACL and the
// admin client certificate strand certs writes (CN=admin) as the super
// user; server.conf carries the same three lines commented out ("#acl "),
// which, uncommented, set the same. scripts/drill.sh grants User:CN=verify
// its ACLs as the admin, prefixed on the workload's names, and on the
// cluster only Describe.
func TestComposeACLs(t *testing.T) {
	check := func(name, path string) {
		t.Helper()
		var cfg node.Config
		if err := applyConfigFile(&cfg, path, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		a := cfg.Authorizer
		if a.ClassName == "" || a.AllowEveryoneIfNoACLFound {
			t.Errorf("%s: authorizer %q, allow.everyone.if.no.acl.found %v: want the StandardAuthorizer, false", name, a.ClassName, a.AllowEveryoneIfNoACLFound)
		}
		if len(a.SuperUsers) != 1 || a.SuperUsers[0] != auth.User("CN=admin") {
			t.Errorf("%s: super.users %v, want [User:CN=admin]", name, a.SuperUsers)
		}
	}
	deploy := filepath.Join("..", "..", "deploy")
	check("server.drill.conf", filepath.Join(deploy, "server.drill.conf"))

	main := string(mustRead(t, filepath.Join(deploy, "server.conf")))
	if s := confSettings(t, filepath.Join(deploy, "server.conf")); s["authorizer.class.name"] != "" {
		t.Errorf("server.conf: ACLs on by default (%q); the README's compose commands expect them off", s["authorizer.class.name"])
	}
	if strings.Count(main, "\n#acl ") != 3 {
		t.Fatalf("server.conf: want the three ACL settings commented out with \"#acl \"")
	}
	on := filepath.Join(t.TempDir(), "server.conf")
	if err := os.WriteFile(on, []byte(strings.ReplaceAll(main, "\n#acl ", "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	check("server.conf with #acl uncommented", on)

	// The admin principal is strand certs' admin client certificate.
	certsOut := filepath.Join(t.TempDir(), "certs")
	if _, err := runCerts(t, "--out", certsOut, "--hosts", "node1,localhost", "--clients", "admin,verify"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"admin.properties", "verify.properties"} {
		if _, err := os.Stat(filepath.Join(certsOut, f)); err != nil {
			t.Error(err)
		}
	}

	drill := string(mustRead(t, filepath.Join("..", "..", "scripts", "drill.sh")))
	for _, want := range []string{
		"--allow-principal User:CN=verify",
		"--resource-pattern-type prefixed --topic verify-",
		"--resource-pattern-type prefixed --group verify-",
		"--resource-pattern-type prefixed --transactional-id verify-",
		"--cluster --operation Describe",
		"--fault-command-config deploy/certs/admin.properties",
	} {
		if !strings.Contains(drill, want) {
			t.Errorf("scripts/drill.sh lacks %q", want)
		}
	}
	for _, line := range strings.Split(drill, "\n") {
		if strings.Contains(line, "--cluster") && !strings.Contains(line, "--operation") {
			t.Errorf("scripts/drill.sh grants the cluster without --operation (All): %s", line)
		}
	}
}
