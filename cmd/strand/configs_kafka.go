package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// kafkaConfigsShape gives `strand configs` kafka-configs.sh's own shape
// (ConfigCommand), next to the describe and alter subcommands:
//
//	strand configs --describe --entity-type topics|brokers (--entity-name X | --entity-default) [--all]
//	strand configs --alter --entity-type topics|brokers (--entity-name X | --entity-default) \
//	    --add-config k1=v1,k2=[a,b] --delete-config k1,k2
//	strand configs --describe|--alter --entity-type users … (configs_users.go: SCRAM credentials)
//	strand configs --describe|--alter --entity-type clients [--entity-type users] … (configs_quotas.go: client quotas)
//
// As in kafka-configs, --entity-type may be given twice (users and
// clients: the quotas of a user's clients), and the --entity-name and
// --entity-default flags pair with the types in command-line order.
func kafkaConfigsShape(cmd *cobra.Command) {
	var (
		describe, alter, all    bool
		entityTypes, names      []string
		addConfig, deleteConfig string
	)
	f := cmd.Flags()
	f.BoolVar(&describe, "describe", false, "list configs of the given entity")
	f.BoolVar(&alter, "alter", false, "alter configs of the given entity (--add-config, --delete-config)")
	f.StringArrayVar(&entityTypes, "entity-type", nil, "topics, brokers, users (SCRAM credentials, client quotas) or clients (client quotas); users and clients may be given together")
	f.Var(entityNameFlag{&names, false}, "entity-name", "the topic name, broker id, user name or client id")
	f.VarPF(entityNameFlag{&names, true}, "entity-default", "", "the default entity (brokers, users, clients), in the place of a name").NoOptDefVal = "true"
	f.BoolVar(&all, "all", false, "with --describe: every config, not only the dynamic ones")
	f.StringVar(&addConfig, "add-config", "", "k1=v1,k2=[v1,v2,v2],k3=v3 to set")
	f.StringVar(&deleteConfig, "delete-config", "", "k1,k2 to remove (back to the default)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return fmt.Errorf("unknown subcommand %q (describe, alter, or kafka-configs' --describe/--alter)", args[0])
		}
		if describe == alter {
			return fmt.Errorf("give exactly one of --describe and --alter (or a subcommand: describe, alter)")
		}
		types := make([]string, len(entityTypes))
		for i, t := range entityTypes {
			types[i] = map[string]string{"user": "users", "client": "clients", "topic": "topics", "broker": "brokers"}[t]
			if types[i] == "" {
				types[i] = t
			}
		}
		if len(names) > len(types) {
			return fmt.Errorf("more entity names specified than entity types")
		}
		if slices.Contains(types, "clients") || len(types) == 2 {
			return clientQuotasCommand(cmd, describe, types, names, addConfig, deleteConfig)
		}
		if len(types) != 1 {
			return fmt.Errorf("give --entity-type (topics, brokers, users or clients) once, or users and clients together")
		}
		entityType := types[0]
		var entityName string
		entityDefault := len(names) == 1 && names[0] == ""
		if len(names) == 1 {
			entityName = names[0]
		}
		var broker bool
		switch entityType {
		case "users": // SCRAM credentials (configs_users.go) and client quotas (configs_quotas.go)
			return usersCommand(cmd, describe, entityName, entityDefault, addConfig, deleteConfig)
		case "topics":
		case "brokers":
			broker = true
		default:
			return fmt.Errorf("--entity-type must be topics, brokers, users or clients, not %q", entityType)
		}
		if entityDefault == (entityName != "") {
			return fmt.Errorf("give exactly one of --entity-name and --entity-default")
		}
		if entityDefault && !broker {
			return fmt.Errorf("--entity-default applies to --entity-type brokers only")
		}
		id := client.BrokerDefault
		if broker && !entityDefault {
			n, err := strconv.ParseInt(entityName, 10, 32)
			if err != nil || n < 0 {
				return fmt.Errorf("the entity name for brokers must be a valid integer broker id, not %q", entityName)
			}
			id = int32(n)
		}
		// Kafka's phrases: "broker 1", "topic t", "brokers in the cluster".
		what := "topic " + entityName
		if broker {
			what = "broker " + entityName
		}
		if describe {
			return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
				var entries []*pb.ConfigEntry
				var err error
				if broker {
					entries, err = adm.DescribeBrokerConfigs(ctx, id)
				} else {
					entries, err = adm.DescribeTopicConfigs(ctx, entityName)
				}
				if err != nil {
					return err
				}
				dynamic := "topic"
				switch {
				case entityDefault:
					dynamic = "dynamic_default_broker"
				case broker:
					dynamic = "dynamic_broker"
				}
				switch {
				case entityDefault && all:
					fmt.Println("All configs for default brokers in the cluster are:")
				case entityDefault:
					fmt.Println("Default configs for brokers in the cluster are:")
				case all:
					fmt.Printf("All configs for %s are:\n", what)
				default:
					fmt.Printf("Dynamic configs for %s are:\n", what)
				}
				for _, e := range entries {
					if !all && e.Source != dynamic {
						continue
					}
					fmt.Printf("  %s=%s sensitive=%t synonyms={%s}\n", e.Name, shownValue(e), e.IsSensitive, synonyms(e))
				}
				return nil
			})
		}
		set, err := parseAddConfig(addConfig)
		if err != nil {
			return err
		}
		var del []string
		for _, k := range strings.Split(deleteConfig, ",") {
			if k = strings.TrimSpace(k); k != "" {
				del = append(del, k)
			}
		}
		if len(set) == 0 && len(del) == 0 {
			return fmt.Errorf("nothing to alter: give --add-config and/or --delete-config")
		}
		return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
			if broker {
				err = adm.AlterBrokerConfigs(ctx, id, set, del)
			} else {
				err = adm.AlterTopicConfigsSetDelete(ctx, entityName, set, del)
			}
			if err != nil {
				return err
			}
			if entityDefault {
				fmt.Println("Completed updating default config for brokers in the cluster.")
			} else {
				fmt.Printf("Completed updating config for %s.\n", what)
			}
			return nil
		})
	}
}

// entityNameFlag is --entity-name (def false) or --entity-default (def
// true): both append to one list in command-line order, "" for a
// default, so each pairs with its --entity-type as kafka-configs pairs
// them.
type entityNameFlag struct {
	list *[]string
	def  bool
}

func (e entityNameFlag) String() string { return "" }

func (e entityNameFlag) Set(v string) error {
	switch {
	case !e.def:
		if v == "" {
			return fmt.Errorf("an empty entity name: for the default entity give --entity-default")
		}
		*e.list = append(*e.list, v)
	case v == "true":
		*e.list = append(*e.list, "")
	case v != "false":
		return fmt.Errorf("--entity-default takes no value")
	}
	return nil
}

func (e entityNameFlag) Type() string {
	if e.def {
		return "bool"
	}
	return "string"
}

// kafkaSource is a ConfigEntry source under Kafka's ConfigSource name.
func kafkaSource(src string) string {
	switch src {
	case "dynamic_broker":
		return "DYNAMIC_BROKER_CONFIG"
	case "dynamic_default_broker":
		return "DYNAMIC_DEFAULT_BROKER_CONFIG"
	case "broker":
		return "STATIC_BROKER_CONFIG"
	case "topic":
		return "DYNAMIC_TOPIC_CONFIG"
	}
	return "DEFAULT_CONFIG"
}

func shownValue(e *pb.ConfigEntry) string {
	if e.IsSensitive {
		return "null"
	}
	return e.Value
}

// synonyms is Kafka's "SOURCE:name=value, …", the one in force first.
func synonyms(e *pb.ConfigEntry) string {
	syn := e.Synonyms
	if len(syn) == 0 {
		syn = []*pb.ConfigSynonym{{Name: e.Name, Value: e.Value, Source: e.Source}}
	}
	parts := make([]string, 0, len(syn))
	for _, s := range syn {
		v := s.Value
		if e.IsSensitive {
			v = "null"
		}
		parts = append(parts, fmt.Sprintf("%s:%s=%s", kafkaSource(s.Source), s.Name, v))
	}
	return strings.Join(parts, ", ")
}

// parseAddConfig reads kafka-configs' --add-config: k=v pairs separated by
// commas, a value in square brackets being a list whose commas are its
// own (k=[a,b] sets k to "a,b").
func parseAddConfig(s string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	var items []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, s[start:i])
				start = i + 1
			}
		}
	}
	items = append(items, s[start:])
	for _, it := range items {
		k, v, ok := strings.Cut(strings.TrimSpace(it), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--add-config %q: want k1=v1,k2=[v1,v2],…", it)
		}
		if strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	return out, nil
}

// reachedBroker is the broker `configs describe --broker` describes: the
// lowest registered id (the only one of a single-node cluster).
func reachedBroker(ctx context.Context, adm *client.Admin) (int32, error) {
	c, err := adm.DescribeCluster(ctx)
	if err != nil {
		return 0, err
	}
	if len(c.Brokers) == 0 {
		return 0, fmt.Errorf("no broker is registered")
	}
	ids := make([]int32, 0, len(c.Brokers))
	for _, b := range c.Brokers {
		ids = append(ids, b.NodeId)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids[0], nil
}
