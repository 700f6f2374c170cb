package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
