package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
)

// Client quotas in kafka-configs' shape (issue 22):
//
//	strand configs --alter --entity-type users (--entity-name alice | --entity-default) \
//	    --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152 --delete-config request_percentage
//	strand configs --describe --entity-type users [--entity-name alice | --entity-default]

// quotaKeys are the keys of a user entity this file handles (helper B's
// SCRAM credentials are the other configs of the users entity).
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
			return nil, fmt.Errorf("unknown quota key %q for --entity-type users: want producer_byte_rate, consumer_byte_rate or request_percentage", k)
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
	u := client.QuotaUser{Name: name, Default: def}
	if describe {
		return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
			qs, err := adm.DescribeUserQuotas(ctx, u)
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
				if q.User.Default {
					fmt.Printf("Quota configs for the default user-principal are %s\n", strings.Join(vals, ", "))
				} else {
					fmt.Printf("Quota configs for user-principal '%s' are %s\n", q.User.Name, strings.Join(vals, ", "))
				}
			}
			return nil
		})
	}
	if !def && name == "" {
		return fmt.Errorf("give exactly one of --entity-name and --entity-default")
	}
	set, err := parseQuotaConfig(addConfig)
	if err != nil {
		return err
	}
	var del []string
	for _, k := range strings.Split(deleteConfig, ",") {
		if k = strings.TrimSpace(k); k != "" {
			if !quotaKeys[k] {
				return fmt.Errorf("unknown quota key %q for --entity-type users", k)
			}
			del = append(del, k)
		}
	}
	if len(set) == 0 && len(del) == 0 {
		return fmt.Errorf("nothing to alter: give --add-config and/or --delete-config")
	}
	return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
		if err := adm.AlterUserQuotas(ctx, u, set, del); err != nil {
			return err
		}
		if def {
			fmt.Println("Completed updating default config for users in the cluster.")
		} else {
			fmt.Printf("Completed updating config for user %s.\n", name)
		}
		return nil
	})
}
