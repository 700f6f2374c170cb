package main

// strand acls, in the shape of Kafka's kafka-acls
// (AclCommand): --add, --remove and --list of ACLs on topics, groups,
// transactional ids and the cluster, with its --producer and --consumer
// conveniences and its output lines.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/authz"
	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/internal/auth"
)

func init() {
	extraCommands = append(extraCommands, aclsCmd)
}

// aclOptions is what the command line asked.
type aclOptions struct {
	add, remove, list, force, producer, consumer, idempotent, cluster bool
	topics, groups, txnIDs                                            []string
	patternType                                                       string
	operations                                                        []string
	allowPrincipals, denyPrincipals, allowHosts, denyHosts            []string
	listPrincipals                                                    []string
}

// aclResource is a resource pattern (adding) or pattern filter (listing,
// removing): a type, a name and a pattern type.
type aclResource struct {
	typ     client.ACLResourceType
	name    string
	pattern client.ACLPatternType
}

// String is Kafka's ResourcePattern (and ResourcePatternFilter) toString.
func (r aclResource) String() string {
	return fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s)", r.typ, r.name, r.pattern)
}

// aclEntry is an access control entry.
type aclEntry struct {
	principal, host string
	op              client.ACLOperation
	perm            client.ACLPermission
}

// String is Kafka's AccessControlEntry toString.
func (e aclEntry) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s)", e.principal, e.host, e.op, e.perm)
}

func entryOf(b client.ACLBinding) aclEntry {
	return aclEntry{principal: b.Principal, host: b.Host, op: b.Operation, perm: b.Permission}
}

func resourceOf(b client.ACLBinding) aclResource {
	return aclResource{typ: b.ResourceType, name: b.ResourceName, pattern: b.PatternType}
}

func sortEntries(es []aclEntry) {
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.principal != b.principal {
			return a.principal < b.principal
		}
		if a.host != b.host {
			return a.host < b.host
		}
		if a.perm != b.perm {
			return a.perm > b.perm // ALLOW before DENY
		}
		return a.op < b.op
	})
}

func sortResources(rs []aclResource) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.typ != b.typ {
			return a.typ < b.typ
		}
		if a.pattern != b.pattern {
			return a.pattern < b.pattern
		}
		return a.name < b.name
	})
}

// supportedOps is Kafka's AclEntry.supportedOperations (All is allowed
// everywhere).
var supportedOps = map[client.ACLResourceType][]client.ACLOperation{
	client.ACLResourceTopic: {client.ACLOpRead, client.ACLOpWrite, client.ACLOpCreate, client.ACLOpDescribe, client.ACLOpDelete,
		client.ACLOpAlter, client.ACLOpDescribeConfigs, client.ACLOpAlterConfigs},
	client.ACLResourceGroup: {client.ACLOpRead, client.ACLOpDescribe, client.ACLOpDelete},
	client.ACLResourceCluster: {client.ACLOpCreate, client.ACLOpClusterAction, client.ACLOpDescribeConfigs, client.ACLOpAlterConfigs,
		client.ACLOpIdempotentWrite, client.ACLOpAlter, client.ACLOpDescribe},
	client.ACLResourceTransactionalID: {client.ACLOpDescribe, client.ACLOpWrite},
	client.ACLResourceDelegationToken: {client.ACLOpDescribe},
	client.ACLResourceUser:            {client.ACLOpCreateTokens, client.ACLOpDescribeTokens},
}

func aclsCmd() *cobra.Command {
	var o aclOptions
	cmd := &cobra.Command{
		Use:   "acls",
		Short: "Add, remove or list ACLs (kafka-acls)",
		Long: `Manages the cluster's ACLs as Kafka's kafka-acls does. Exactly one of --add,
--remove or --list. Resources: --topic, --group, --transactional-id (each
repeatable; '*' is every one) and --cluster, with --resource-pattern-type
literal (default) or prefixed; listing and removing also take any and match
(match: every ACL that applies to the name). Entries: --allow-principal and
--deny-principal (Type:Name, User:* for everyone), --allow-host and --deny-host
(default *), --operation (repeatable, default All). --producer adds Write,
Describe, Create on the topics (Write, Describe on --transactional-id; with
--idempotent IdempotentWrite on the cluster); --consumer Read, Describe on
the topics and Read on the groups. --remove asks before it deletes unless
--force is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runACLs(cmd, &o)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.add, "add", false, "add ACLs")
	f.BoolVar(&o.remove, "remove", false, "remove ACLs")
	f.BoolVar(&o.list, "list", false, "list ACLs (of the resources given, or all)")
	f.BoolVar(&o.force, "force", false, "do not ask before removing")
	f.BoolVar(&o.producer, "producer", false, "ACLs for a producer: Write, Describe, Create on the topics")
	f.BoolVar(&o.consumer, "consumer", false, "ACLs for a consumer: Read, Describe on the topics, Read on the groups")
	f.BoolVar(&o.idempotent, "idempotent", false, "with --producer: IdempotentWrite on the cluster")
	f.BoolVar(&o.cluster, "cluster", false, "the cluster resource")
	f.StringArrayVar(&o.topics, "topic", nil, "topic ('*': every topic)")
	f.StringArrayVar(&o.groups, "group", nil, "consumer group ('*': every group)")
	f.StringArrayVar(&o.txnIDs, "transactional-id", nil, "transactional id ('*': every one)")
	f.StringVar(&o.patternType, "resource-pattern-type", "literal", "literal, prefixed, any or match")
	f.StringArrayVar(&o.operations, "operation", nil, "operation allowed or denied (Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All; default All)")
	f.StringArrayVar(&o.allowPrincipals, "allow-principal", nil, "principal allowed (Type:Name; User:* is everyone)")
	f.StringArrayVar(&o.denyPrincipals, "deny-principal", nil, "principal denied (Type:Name)")
	f.StringArrayVar(&o.allowHosts, "allow-host", nil, "host the allowed principals may come from (default *)")
	f.StringArrayVar(&o.denyHosts, "deny-host", nil, "host the denied principals are denied from (default *)")
	f.StringArrayVar(&o.listPrincipals, "principal", nil, "with --list: only the ACLs of this principal (repeatable)")
	return cmd
}

func parsePatternType(s string) (client.ACLPatternType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "literal":
		return client.ACLPatternLiteral, nil
	case "prefixed":
		return client.ACLPatternPrefixed, nil
	case "any":
		return client.ACLPatternAny, nil
	case "match":
		return client.ACLPatternMatch, nil
	}
	return 0, fmt.Errorf("--resource-pattern-type %q: want literal, prefixed, any or match", s)
}

// resources are the resource patterns (or filters) the options name, as
// Kafka's getResourceFilter.
func (o *aclOptions) resources(pt client.ACLPatternType) []aclResource {
	var out []aclResource
	for _, t := range o.topics {
		out = append(out, aclResource{client.ACLResourceTopic, strings.TrimSpace(t), pt})
	}
	if pt == client.ACLPatternLiteral && (o.cluster || o.idempotent) {
		out = append(out, aclResource{client.ACLResourceCluster, authz.ClusterName, client.ACLPatternLiteral})
	}
	for _, g := range o.groups {
		out = append(out, aclResource{client.ACLResourceGroup, strings.TrimSpace(g), pt})
	}
	for _, id := range o.txnIDs {
		out = append(out, aclResource{client.ACLResourceTransactionalID, id, pt})
	}
	return out
}

// entries are the access control entries for the operations: every
// allowed principal from every allowed host, every denied one from every
// denied host (hosts default to * when principals are given).
func (o *aclOptions) entries(ops []client.ACLOperation) ([]aclEntry, error) {
	var out []aclEntry
	for _, side := range []struct {
		principals, hosts []string
		perm              client.ACLPermission
	}{{o.allowPrincipals, o.allowHosts, client.ACLPermissionAllow}, {o.denyPrincipals, o.denyHosts, client.ACLPermissionDeny}} {
		hosts := side.hosts
		if len(hosts) == 0 {
			hosts = []string{"*"}
		}
		for _, p := range side.principals {
			pr, err := auth.ParsePrincipal(p)
			if err != nil {
				return nil, err
			}
			for _, op := range ops {
				for _, h := range hosts {
					out = append(out, aclEntry{principal: pr.String(), host: strings.TrimSpace(h), op: op, perm: side.perm})
				}
			}
		}
	}
	sortEntries(out)
	return out, nil
}

// plan maps each resource (filter) to its entries, as Kafka's
// getResourceFilterToAcls: the command line's operations, or the
// producer's and consumer's.
func (o *aclOptions) plan(pt client.ACLPatternType) (map[aclResource][]aclEntry, error) {
	out := map[aclResource][]aclEntry{}
	res := o.resources(pt)
	if len(res) == 0 {
		return nil, fmt.Errorf("You must provide at least one resource: --topic <topic> or --cluster or --group <group> or --transactional-id <id>")
	}
	with := func(ops ...client.ACLOperation) ([]aclEntry, error) { return o.entries(ops) }
	merge := func(r aclResource, es []aclEntry) {
		if _, ok := out[r]; !ok {
			out[r] = []aclEntry{}
		}
		seen := map[aclEntry]bool{}
		for _, e := range out[r] {
			seen[e] = true
		}
		for _, e := range es {
			if !seen[e] {
				out[r] = append(out[r], e)
				seen[e] = true
			}
		}
		sortEntries(out[r])
	}
	if !o.producer && !o.consumer {
		var ops []client.ACLOperation
		names := o.operations
		if len(names) == 0 {
			names = []string{"All"}
		}
		for _, n := range names {
			op, err := authz.ParseOperation(strings.TrimSpace(n))
			if err != nil || op == authz.OpAny {
				return nil, fmt.Errorf("--operation %q: not one of Kafka's operations", n)
			}
			ops = append(ops, client.ACLOperation(op))
		}
		es, err := with(ops...)
		if err != nil {
			return nil, err
		}
		for _, r := range res {
			merge(r, es)
		}
	}
	if o.producer {
		topicEs, err := with(client.ACLOpWrite, client.ACLOpDescribe, client.ACLOpCreate)
		if err != nil {
			return nil, err
		}
		txnEs, _ := with(client.ACLOpWrite, client.ACLOpDescribe)
		for _, r := range res {
			switch r.typ {
			case client.ACLResourceTopic:
				merge(r, topicEs)
			case client.ACLResourceTransactionalID:
				merge(r, txnEs)
			}
		}
		if o.idempotent {
			es, _ := with(client.ACLOpIdempotentWrite)
			merge(aclResource{client.ACLResourceCluster, authz.ClusterName, client.ACLPatternLiteral}, es)
		}
	}
	if o.consumer {
		topicEs, err := with(client.ACLOpRead, client.ACLOpDescribe)
		if err != nil {
			return nil, err
		}
		groupEs, _ := with(client.ACLOpRead)
		for _, r := range res {
			switch r.typ {
			case client.ACLResourceTopic:
				merge(r, topicEs)
			case client.ACLResourceGroup:
				merge(r, groupEs)
			}
		}
	}
	// Kafka's validateOperation: each resource type takes its operations.
	for r, es := range out {
		valid := map[client.ACLOperation]bool{client.ACLOpAll: true}
		for _, op := range supportedOps[r.typ] {
			valid[op] = true
		}
		for _, e := range es {
			if !valid[e.op] {
				names := []string{client.ACLOpAll.String()}
				for _, op := range supportedOps[r.typ] {
					names = append(names, op.String())
				}
				return nil, fmt.Errorf("ResourceType %s only supports operations %s", r.typ, strings.Join(names, ", "))
			}
		}
	}
	return out, nil
}

func runACLs(cmd *cobra.Command, o *aclOptions) error {
	actions := 0
	for _, b := range []bool{o.add, o.remove, o.list} {
		if b {
			actions++
		}
	}
	if actions != 1 {
		return fmt.Errorf("Command must include exactly one action: --list, --add, --remove")
	}
	if o.list && (o.producer || o.consumer || len(o.allowPrincipals)+len(o.denyPrincipals) > 0) {
		return fmt.Errorf("--list takes resources and --principal only")
	}
	if (o.producer || o.consumer) && (len(o.operations) > 0 || len(o.denyPrincipals) > 0) {
		return fmt.Errorf("With --producer or --consumer, --operation and --deny-principal are not allowed")
	}
	if o.idempotent && !o.producer {
		return fmt.Errorf("--idempotent goes with --producer")
	}
	pt, err := parsePatternType(o.patternType)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	return withAdmin(cmd, 60*time.Second, func(ctx context.Context, adm *client.Admin) error {
		switch {
		case o.add:
			return addACLs(ctx, adm, o, pt, out)
		case o.remove:
			return removeACLs(ctx, adm, o, pt, out, bufio.NewReader(cmd.InOrStdin()))
		default:
			return listACLs(ctx, adm, o, pt, out)
		}
	})
}

func exactFilter(r aclResource) client.ACLFilter {
	name := r.name
	f := client.AnyACL()
	f.ResourceType, f.ResourceName, f.PatternType = r.typ, &name, r.pattern
	return f
}

func addACLs(ctx context.Context, adm *client.Admin, o *aclOptions, pt client.ACLPatternType, out io.Writer) error {
	if pt != client.ACLPatternLiteral && pt != client.ACLPatternPrefixed {
		return fmt.Errorf("A '--resource-pattern-type' value of '%s' is not valid when adding acls.", pt)
	}
	plan, err := o.plan(pt)
	if err != nil {
		return err
	}
	var rs []aclResource
	for r, es := range plan {
		if len(es) == 0 {
			return fmt.Errorf("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
		}
		rs = append(rs, r)
	}
	sortResources(rs)
	for _, r := range rs {
		existing, err := adm.DescribeACLs(ctx, exactFilter(r))
		if err != nil {
			return err
		}
		have := map[aclEntry]bool{}
		for _, b := range existing {
			have[entryOf(b)] = true
		}
		var todo []client.ACLBinding
		var lines []string
		for _, e := range plan[r] {
			if have[e] {
				fmt.Fprintf(out, "Acl (pattern=%s, entry=%s) already exists.\n", r, e)
				continue
			}
			todo = append(todo, client.ACLBinding{ResourceType: r.typ, ResourceName: r.name, PatternType: r.pattern,
				Principal: e.principal, Host: e.host, Operation: e.op, Permission: e.perm})
			lines = append(lines, "\t"+e.String())
		}
		if len(todo) == 0 {
			continue
		}
		fmt.Fprintf(out, "Adding ACLs for resource `%s`: \n %s\n\n", r, strings.Join(lines, "\n"))
		results, err := adm.CreateACLs(ctx, todo)
		if err != nil {
			return err
		}
		for i, err := range results {
			if err != nil {
				return fmt.Errorf("creating (pattern=%s, entry=%s): %w", r, entryOf(todo[i]), err)
			}
		}
	}
	return nil
}

func confirm(o *aclOptions, in *bufio.Reader, out io.Writer, msg string) bool {
	if o.force {
		return true
	}
	fmt.Fprintln(out, msg)
	line, _ := in.ReadString('\n')
	return strings.EqualFold(strings.TrimSpace(line), "y")
}

func removeACLs(ctx context.Context, adm *client.Admin, o *aclOptions, pt client.ACLPatternType, out io.Writer, in *bufio.Reader) error {
	var plan map[aclResource][]aclEntry
	if len(o.allowPrincipals)+len(o.denyPrincipals) == 0 && !o.producer && !o.consumer {
		// No entries: every ACL of the resources.
		res := o.resources(pt)
		if len(res) == 0 {
			return fmt.Errorf("You must provide at least one resource: --topic <topic> or --cluster or --group <group> or --transactional-id <id>")
		}
		plan = map[aclResource][]aclEntry{}
		for _, r := range res {
			plan[r] = nil
		}
	} else {
		var err error
		if plan, err = o.plan(pt); err != nil {
			return err
		}
	}
	var rs []aclResource
	for r := range plan {
		rs = append(rs, r)
	}
	sortResources(rs)
	for _, r := range rs {
		es := plan[r]
		var filters []client.ACLFilter
		if len(es) == 0 {
			if !confirm(o, in, out, fmt.Sprintf("Are you sure you want to delete all ACLs for resource filter `%s`? (y/n)", r)) {
				continue
			}
			filters = append(filters, exactFilter(r))
		} else {
			lines := make([]string, len(es))
			for i, e := range es {
				lines[i] = "\t" + e.String()
			}
			if !confirm(o, in, out, fmt.Sprintf("Are you sure you want to remove ACLs: \n %s\n from resource filter `%s`? (y/n)", strings.Join(lines, "\n"), r)) {
				continue
			}
			for _, e := range es {
				f := exactFilter(r)
				principal, host := e.principal, e.host
				f.Principal, f.Host, f.Operation, f.Permission = &principal, &host, e.op, e.perm
				filters = append(filters, f)
			}
		}
		results, err := adm.DeleteACLs(ctx, filters)
		if err != nil {
			return err
		}
		for _, res := range results {
			if res.Err != nil {
				return res.Err
			}
		}
	}
	return nil
}

func listACLs(ctx context.Context, adm *client.Admin, o *aclOptions, pt client.ACLPatternType, out io.Writer) error {
	filters := []client.ACLFilter{client.AnyACL()}
	if res := o.resources(pt); len(res) > 0 {
		filters = filters[:0]
		for _, r := range res {
			filters = append(filters, exactFilter(r))
		}
	}
	byResource := map[aclResource][]aclEntry{}
	for _, f := range filters {
		bs, err := adm.DescribeACLs(ctx, f)
		if err != nil {
			return err
		}
		for _, b := range bs {
			r := resourceOf(b)
			byResource[r] = append(byResource[r], entryOf(b))
		}
	}
	show := func(keep func(aclEntry) bool) {
		var rs []aclResource
		for r := range byResource {
			rs = append(rs, r)
		}
		sortResources(rs)
		for _, r := range rs {
			var lines []string
			es := append([]aclEntry(nil), byResource[r]...)
			sortEntries(es)
			var last *aclEntry
			for i, e := range es {
				if keep(e) && (last == nil || *last != e) {
					lines = append(lines, "\t"+e.String())
					last = &es[i]
				}
			}
			if len(lines) == 0 {
				continue
			}
			fmt.Fprintf(out, "Current ACLs for resource `%s`:\n%s\n\n", r, strings.Join(lines, "\n"))
		}
	}
	if len(o.listPrincipals) == 0 {
		show(func(aclEntry) bool { return true })
		return nil
	}
	for _, p := range o.listPrincipals {
		pr, err := auth.ParsePrincipal(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "ACLs for principal `%s`\n", pr)
		show(func(e aclEntry) bool { return e.principal == pr.String() })
	}
	return nil
}
