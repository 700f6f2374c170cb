package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// SASL: kafka-configs' users entity, its SCRAM credentials:
//
//	strand configs --alter --entity-type users --entity-name alice \
//	    --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
//	strand configs --alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-256
//	strand configs --describe --entity-type users [--entity-name alice]
//
// The password is salted here (a fresh random salt, 4096 iterations unless
// given: Kafka's default) and only the salt and the salted password are
// sent, as kafka-configs does. As in Kafka, one request may change a user
// once: two mechanisms of one user in one --add-config are refused
// DUPLICATE_RESOURCE. Other user configs (quotas) are not served here.

// usersConfigKeys are the user config keys this file serves.
var usersConfigKeys = []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}

func isScramKey(k string) bool { return k == "SCRAM-SHA-256" || k == "SCRAM-SHA-512" }

// kafkaConfigsUsers runs --describe or --alter on --entity-type users.
func kafkaConfigsUsers(cmd *cobra.Command, describe bool, name string, entityDefault bool, addConfig, deleteConfig string) error {
	if entityDefault {
		return fmt.Errorf("--entity-default: the users' default has no SCRAM credentials")
	}
	if describe {
		return withAdmin(cmd, 30*time.Second, func(ctx context.Context, adm *client.Admin) error {
			var users []string
			if name != "" {
				users = []string{name}
			}
			creds, failed, err := adm.DescribeUserScramCredentials(ctx, users...)
			if err != nil {
				return err
			}
			for u, e := range failed {
				if errs.CodeOf(e) != pb.ErrorCode_RESOURCE_NOT_FOUND {
					return fmt.Errorf("describing user %s: %w", u, e)
				}
			}
			names := make([]string, 0, len(creds))
			for u := range creds {
				names = append(names, u)
			}
			sort.Strings(names)
			for _, u := range names {
				fmt.Println(scramDescribeLine(u, creds[u]))
			}
			return nil
		})
	}
	if name == "" {
		return fmt.Errorf("--alter --entity-type users needs --entity-name")
	}
	set, err := parseAddConfig(addConfig)
	if err != nil {
		return err
	}
	var ups []client.ScramUpsertion
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !isScramKey(k) {
			return fmt.Errorf("user config %q is not supported (supported: %s)", k, strings.Join(usersConfigKeys, ", "))
		}
		up, err := parseScramValue(name, k, set[k])
		if err != nil {
			return err
		}
		ups = append(ups, up)
	}
	var dels []client.ScramDeletion
	for _, k := range strings.Split(deleteConfig, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if !isScramKey(k) {
			return fmt.Errorf("user config %q is not supported (supported: %s)", k, strings.Join(usersConfigKeys, ", "))
		}
		dels = append(dels, client.ScramDeletion{User: name, Mechanism: k})
	}
	if len(ups) == 0 && len(dels) == 0 {
		return fmt.Errorf("nothing to alter: give --add-config and/or --delete-config")
	}
	return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
		res, err := adm.AlterUserScramCredentials(ctx, ups, dels)
		if err != nil {
			return err
		}
		if e := res[name]; e != nil {
			return fmt.Errorf("AlterUserScramCredentials failed: %w", e)
		}
		fmt.Printf("Completed updating config for user %s.\n", name)
		return nil
	})
}

// parseScramValue reads "iterations=8192,password=secret" (the bracketed
// value of a SCRAM key; iterations optional).
func parseScramValue(user, mechanism, v string) (client.ScramUpsertion, error) {
	up := client.ScramUpsertion{User: user, Mechanism: mechanism, Iterations: 4096}
	havePassword := false
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return up, fmt.Errorf("%s=[%s]: want iterations=N,password=P", mechanism, v)
		}
		switch strings.TrimSpace(k) {
		case "iterations":
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if err != nil {
				return up, fmt.Errorf("%s: iterations %q is not a number", mechanism, val)
			}
			up.Iterations = n
		case "password":
			up.Password, havePassword = val, true
		default:
			return up, fmt.Errorf("%s: unknown field %q (iterations, password)", mechanism, k)
		}
	}
	if !havePassword || up.Password == "" {
		return up, fmt.Errorf("%s: a password is required (%s=[password=…])", mechanism, mechanism)
	}
	return up, nil
}

// scramDescribeLine is kafka-configs' line for a user's credentials.
func scramDescribeLine(user string, infos []client.ScramCredentialInfo) string {
	parts := make([]string, 0, len(infos))
	for _, i := range infos {
		parts = append(parts, fmt.Sprintf("%s=iterations=%d", i.Mechanism, i.Iterations))
	}
	return fmt.Sprintf("SCRAM credential configs for user-principal '%s' are %s", user, strings.Join(parts, ", "))
}

// usersCommand is kafka-configs' --entity-type users: the SCRAM keys go to
// AlterUserScramCredentials, the quota keys to AlterClientQuotas, as
// kafka-configs splits them; --describe prints the quotas, then the
// SCRAM credentials (the default user has only quotas).
func usersCommand(cmd *cobra.Command, describe bool, name string, entityDefault bool, addConfig, deleteConfig string) error {
	if describe {
		if err := userQuotasCommand(cmd, true, name, entityDefault, "", ""); err != nil {
			return err
		}
		if entityDefault {
			return nil
		}
		return kafkaConfigsUsers(cmd, true, name, false, "", "")
	}
	scramAdd, quotaAdd := splitUserKeys(addConfig)
	scramDel, quotaDel := splitUserKeys(deleteConfig)
	if scramAdd != "" || scramDel != "" {
		if err := kafkaConfigsUsers(cmd, false, name, entityDefault, scramAdd, scramDel); err != nil {
			return err
		}
	}
	if quotaAdd != "" || quotaDel != "" || (scramAdd == "" && scramDel == "") {
		return userQuotasCommand(cmd, false, name, entityDefault, quotaAdd, quotaDel)
	}
	return nil
}

// splitUserKeys splits a --add-config or --delete-config list at its
// top-level commas (not those inside a SCRAM key's [...]) into the SCRAM
// items and the others, each joined again with commas.
func splitUserKeys(list string) (scramItems, others string) {
	var sc, ot []string
	depth, start := 0, 0
	flush := func(end int) {
		item := strings.TrimSpace(list[start:end])
		if item == "" {
			return
		}
		key, _, _ := strings.Cut(item, "=")
		if isScramKey(strings.TrimSpace(key)) {
			sc = append(sc, item)
		} else {
			ot = append(ot, item)
		}
	}
	for i, r := range list {
		switch r {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				flush(i)
				start = i + 1
			}
		}
	}
	flush(len(list))
	return strings.Join(sc, ","), strings.Join(ot, ",")
}
