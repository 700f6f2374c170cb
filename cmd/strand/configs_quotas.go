package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
)

// Client quotas in kafka-configs' shape:
//
//	strand configs --alter --entity-type users (--entity-name alice | --entity-default) \
//	    --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152 --delete-config request_percentage
//	strand configs --describe --entity-type users [--entity-name alice | --entity-default]
//	strand configs --alter --entity-type clients (--entity-name app | --entity-default) --add-config …
//	strand configs --alter --entity-type users --entity-name alice --entity-type clients --entity-name app --add-config …
//	strand configs --describe --entity-type clients [--entity-name app | --entity-default]
//	strand configs --describe --entity-type users [--entity-name alice] --entity-type clients [--entity-name app]
//
// A describe lists the entities of exactly the types given (Kafka's
// containsOnly filter): a name matches that name, --entity-default the
// default, a type without either any name.

// quotaKeys are the client quota keys (a user's SCRAM credentials are the
// other configs of the users entity: configs_users.go).
var quotaKeys = map[string]bool{client.QuotaProducerByteRate: true, client.QuotaConsumerByteRate: true, client.QuotaRequestPercentage: true}

// quotaKeyOrder is the order a describe prints keys in.
var quotaKeyOrder = []string{client.QuotaProducerByteRate, client.QuotaConsumerByteRate, client.QuotaRequestPercentage}

// parseQuotaConfig reads --add-config for users: k=v pairs whose keys are
// quota keys and values numbers.
func parseQuotaConfig(s string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--add-config %q: want key=value", kv)
		}
		k = strings.TrimSpace(k)
		if !quotaKeys[k] {
			return nil, fmt.Errorf("unknown quota key %q: want producer_byte_rate, consumer_byte_rate or request_percentage", k)
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return nil, fmt.Errorf("--add-config %s=%s: not a number", k, v)
		}
		out[k] = f
	}
	return out, nil
}

// javaDouble prints v as Java's Double.toString does (kafka-configs prints
// quotas so: 1048576.0, 1.048576E7).
func javaDouble(v float64) string {
	a := math.Abs(v)
	if a != 0 && (a >= 1e7 || a < 1e-3) {
		s := strconv.FormatFloat(v, 'E', -1, 64)
		mant, exp, _ := strings.Cut(s, "E")
		if !strings.Contains(mant, ".") {
			mant += ".0"
		}
		e, _ := strconv.Atoi(exp)
		return mant + "E" + strconv.Itoa(e)
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// userQuotasCommand runs --describe or --alter for --entity-type users.
func userQuotasCommand(cmd *cobra.Command, describe bool, name string, def bool, addConfig, deleteConfig string) error {
	var names []string
	if name != "" || def {
		names = []string{name}
	}
	return clientQuotasCommand(cmd, describe, []string{"users"}, names, addConfig, deleteConfig)
}

// quotaEntityWords are kafka-configs' words for a quota entity's parts.
func quotaEntityWords(e client.QuotaEntity) string {
	var parts []string
	for _, p := range []struct {
		word string
		part *client.QuotaPart
	}{{"user-principal", e.User}, {"client-id", e.ClientID}} {
		switch {
		case p.part == nil:
		case p.part.Default:
			parts = append(parts, "the default "+p.word)
		default:
			parts = append(parts, fmt.Sprintf("%s '%s'", p.word, p.part.Name))
		}
	}
	return strings.Join(parts, ", ")
}

// clientQuotasCommand runs --describe or --alter of client quotas: types
// are "users" and/or "clients" in command-line order, names pair with
// them ("" the default; fewer names than types: with --describe, any name).
func clientQuotasCommand(cmd *cobra.Command, describe bool, types, names []string, addConfig, deleteConfig string) error {
	if len(types) > 2 || (len(types) == 2 && (types[0] == types[1] || !slices.Contains(types, "users") || !slices.Contains(types, "clients"))) {
		return fmt.Errorf("only 'users' and 'clients' entity types may be specified together")
	}
	var filter []client.QuotaFilter
	var entity client.QuotaEntity
	for i, t := range types {
		f := client.QuotaFilter{EntityType: client.QuotaEntityUser, Match: client.QuotaMatchSpecified}
		if t == "clients" {
			f.EntityType = client.QuotaEntityClientID
		} else if t != "users" {
			return fmt.Errorf("--entity-type %s cannot be given with clients", t)
		}
		var part *client.QuotaPart
		if i < len(names) {
			part = &client.QuotaPart{Name: names[i], Default: names[i] == ""}
			f.Match, f.Name = client.QuotaMatchExact, names[i]
			if part.Default {
				f.Match = client.QuotaMatchDefault
			}
		}
		if t == "clients" {
			entity.ClientID = part
		} else {
			entity.User = part
		}
		filter = append(filter, f)
	}
	if describe {
		return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
			qs, err := adm.DescribeClientQuotas(ctx, filter, true)
			if err != nil {
				return err
			}
			for _, q := range qs {
				var vals []string
				for _, k := range quotaKeyOrder {
					if v, ok := q.Values[k]; ok {
						vals = append(vals, k+"="+javaDouble(v))
					}
				}
				fmt.Printf("Quota configs for %s are %s\n", quotaEntityWords(q.Entity), strings.Join(vals, ", "))
			}
			return nil
		})
	}
	if len(names) != len(types) {
		return fmt.Errorf("--entity-name or --entity-default must be specified with each --entity-type for --alter")
	}
	for _, list := range []string{addConfig, deleteConfig} {
		for _, kv := range strings.Split(list, ",") {
			if k, _, _ := strings.Cut(kv, "="); (slices.Contains(types, "clients")) && isScramKey(strings.TrimSpace(k)) {
				return fmt.Errorf("only quota configs can be altered for 'clients': %s is a SCRAM credential of a user", strings.TrimSpace(k))
			}
		}
	}
	set, err := parseQuotaConfig(addConfig)
	if err != nil {
		return err
	}
	var del []string
	for _, k := range strings.Split(deleteConfig, ",") {
		if k = strings.TrimSpace(k); k != "" {
			if !quotaKeys[k] {
				return fmt.Errorf("unknown quota key %q: want producer_byte_rate, consumer_byte_rate or request_percentage", k)
			}
			del = append(del, k)
		}
	}
	if len(set) == 0 && len(del) == 0 {
		return fmt.Errorf("nothing to alter: give --add-config and/or --delete-config")
	}
	return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
		if err := adm.AlterClientQuotas(ctx, entity, set, del); err != nil {
			return err
		}
		// kafka-configs names the first type given and its name.
		if names[0] == "" {
			fmt.Printf("Completed updating default config for %s in the cluster.\n", types[0])
		} else {
			fmt.Printf("Completed updating config for %s %s.\n", strings.TrimSuffix(types[0], "s"), names[0])
		}
		return nil
	})
}
