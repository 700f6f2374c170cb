package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strand-io/strand/client"
	"github.com/strand-io/strand/errs"
)

func init() { extraCommands = append(extraCommands, consumerGroupsCmd) }

// cgOpts are kafka-consumer-groups' flags.
type cgOpts struct {
	list, describe, reset, del, delOffsets bool
	groups                                 []string
	allGroups                              bool
	state                                  string
	members, offsets, verbose              bool
	topics                                 []string
	allTopics                              bool
	toEarliest, toLatest                   bool
	toDatetime                             string
	shiftBy, toOffset                      int64
	dryRun, execute                        bool
	isolation                              string
	timeout                                time.Duration
	cmd                                    *cobra.Command
	out, errOut                            io.Writer
}

// stateAll is --state given without a value: show the STATE column (or,
// with --describe, the state view) for every group.
const stateAll = "all"

func consumerGroupsCmd() *cobra.Command {
	o := &cgOpts{out: os.Stdout, errOut: os.Stderr}
	cmd := &cobra.Command{Use: "consumer-groups", Short: "List, describe, reset and delete consumer groups (like kafka-consumer-groups)",
		Long: `List, describe, reset and delete consumer groups, with kafka-consumer-groups'
flags, column headers and messages.

  --list [--state [Stable,Empty]]
  --describe (--group g … | --all-groups) [--offsets | --members [--verbose] | --state]
  --reset-offsets --group g (--topic t[:p,p] … | --all-topics)
      (--to-earliest | --to-latest | --to-datetime YYYY-MM-DDTHH:mm:SS.sss[Z] | --shift-by n | --to-offset n)
      (--dry-run | --execute)
  --delete (--group g … | --all-groups)
  --delete-offsets --group g --topic t[:p,p] …

LAG and LOG-END-OFFSET. A read_uncommitted consumer can read up to the high
watermark (HW), a read_committed one only up to the last stable offset (LSO):
the start of the first open transaction. --describe measures LOG-END-OFFSET,
and LAG from it, at the HW for read_uncommitted and at the LSO for
read_committed, so a group blocked by an open transaction shows its real lag. The broker does not
know a group's isolation level; members of Strand's Go SDK advertise theirs
in their group metadata, and when every member of the group advertises the
same one it is used. Otherwise --isolation-level decides (default
read_uncommitted, the end kafka-consumer-groups measures against); given on
the command line it always wins. Which end was used, and why, is printed on
stderr before each group's table ("LAG of group 'g' is measured against the
high watermark (read_uncommitted, …)"), so stdout keeps Kafka's shape.
--reset-offsets --to-latest resets to the end --isolation-level names (a group
being reset has no members to ask).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.cmd = cmd
			// --list --state Stable,Empty: Kafka's spelling of the filter
			// (--state takes its value after "=" otherwise).
			if len(args) > 0 {
				if !o.list || o.state != stateAll {
					return fmt.Errorf("unexpected arguments %q", args)
				}
				o.state = strings.Join(args, ",")
			}
			return o.run()
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.list, "list", false, "list the consumer groups")
	f.BoolVar(&o.describe, "describe", false, "describe groups: their offsets and lag (default), --members, or --state")
	f.BoolVar(&o.reset, "reset-offsets", false, "reset a group's committed offsets (the group must have no active members)")
	f.BoolVar(&o.del, "delete", false, "delete groups that have no active members, with their offsets")
	f.BoolVar(&o.delOffsets, "delete-offsets", false, "delete a group's committed offsets of --topic")
	f.StringArrayVar(&o.groups, "group", nil, "the consumer group (repeatable)")
	f.BoolVar(&o.allGroups, "all-groups", false, "every group (with --describe, --delete, --reset-offsets)")
	f.StringVar(&o.state, "state", "", "with --list: show each group's state, or only groups in these states (--state Stable,Empty); with --describe: the state view")
	f.Lookup("state").NoOptDefVal = stateAll
	f.BoolVar(&o.members, "members", false, "with --describe: the members")
	f.BoolVar(&o.offsets, "offsets", false, "with --describe: the committed offsets and lag (the default view)")
	f.BoolVar(&o.verbose, "verbose", false, "with --describe --members: each member's assignment")
	f.StringArrayVar(&o.topics, "topic", nil, "topic, or topic:p1,p2 for some of its partitions (repeatable)")
	f.BoolVar(&o.allTopics, "all-topics", false, "with --reset-offsets: every topic the group has offsets for")
	f.BoolVar(&o.toEarliest, "to-earliest", false, "reset to the log start")
	f.BoolVar(&o.toLatest, "to-latest", false, "reset to the log end (the HW, or the LSO with --isolation-level read_committed)")
	f.StringVar(&o.toDatetime, "to-datetime", "", "reset to the first offset whose timestamp is at or after YYYY-MM-DDTHH:mm:SS.sss (local time unless it ends in Z or ±hh:mm)")
	f.Int64Var(&o.shiftBy, "shift-by", 0, "move each committed offset by n (may be negative)")
	f.Int64Var(&o.toOffset, "to-offset", 0, "reset to offset n")
	f.BoolVar(&o.dryRun, "dry-run", false, "with --reset-offsets: show the new offsets only (the default)")
	f.BoolVar(&o.execute, "execute", false, "with --reset-offsets: commit the new offsets")
	f.StringVar(&o.isolation, "isolation-level", "read_uncommitted", "read_uncommitted (LAG against the HW) or read_committed (against the LSO) for groups whose members do not advertise theirs; given, it applies to every group")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for the cluster")
	return cmd
}

func (o *cgOpts) run() error {
	actions := 0
	for _, a := range []bool{o.list, o.describe, o.reset, o.del, o.delOffsets} {
		if a {
			actions++
		}
	}
	if actions != 1 {
		return errors.New("give exactly one of --list, --describe, --reset-offsets, --delete, --delete-offsets")
	}
	switch o.isolation {
	case "read_uncommitted", "read_committed":
	default:
		return fmt.Errorf("--isolation-level %q: want read_uncommitted or read_committed", o.isolation)
	}
	if !o.list && !o.allGroups && len(o.groups) == 0 {
		return errors.New("give --group (or --all-groups)")
	}
	if o.allGroups && len(o.groups) > 0 {
		return errors.New("give --group or --all-groups, not both")
	}
	return withAdmin(o.cmd, o.timeout, func(ctx context.Context, adm *client.Admin) error {
		if o.allGroups {
			gs, err := adm.ListGroups(ctx)
			if err != nil {
				return err
			}
			for _, g := range gs {
				o.groups = append(o.groups, g.Group)
			}
		}
		switch {
		case o.list:
			return o.doList(ctx, adm)
		case o.describe:
			return o.doDescribe(ctx, adm)
		case o.reset:
			return o.doReset(ctx, adm)
		case o.del:
			return o.doDelete(ctx, adm)
		default:
			return o.doDeleteOffsets(ctx, adm)
		}
	})
}

// kafkaTable prints rows like kafka-consumer-groups: a blank line, then
// each cell left-aligned and padded to its column's widest value, cells
// separated by a space (the last column unpadded).
func kafkaTable(w io.Writer, headers []string, rows [][]string) {
	width := make([]int, len(headers))
	for i, h := range headers {
		width[i] = len(h)
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	fmt.Fprintln(w)
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i == len(cells)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", width[i]-len(c)) + " ")
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(headers)
	for _, r := range rows {
		line(r)
	}
}

func (o *cgOpts) doList(ctx context.Context, adm *client.Admin) error {
	gs, err := adm.ListGroups(ctx)
	if err != nil {
		return err
	}
	if o.state == "" {
		for _, g := range gs {
			fmt.Fprintln(o.out, g.Group)
		}
		return nil
	}
	want := map[string]bool{}
	if o.state != stateAll {
		for _, s := range strings.Split(o.state, ",") {
			want[strings.ToLower(strings.TrimSpace(s))] = true
		}
	}
	var rows [][]string
	for _, g := range gs {
		if len(want) == 0 || want[strings.ToLower(g.State)] {
			rows = append(rows, []string{g.Group, g.State})
		}
	}
	kafkaTable(o.out, []string{"GROUP", "STATE"}, rows)
	return nil
}

// describeGroup describes g and says on stderr, in Kafka's words, when it
// does not exist (nil) or has no active members.
func (o *cgOpts) describeGroup(ctx context.Context, adm *client.Admin, g string) (*client.GroupDescription, error) {
	d, err := adm.DescribeGroup(ctx, g)
	if err != nil {
		return nil, err
	}
	switch d.State {
	case "Dead":
		fmt.Fprintf(o.errOut, "\nError: Consumer group '%s' does not exist.\n", g)
		return nil, nil
	case "Empty":
		fmt.Fprintf(o.errOut, "\nConsumer group '%s' has no active members.\n", g)
	case "PreparingRebalance", "CompletingRebalance":
		fmt.Fprintf(o.errOut, "\nWarning: Consumer group '%s' is rebalancing.\n", g)
	}
	return d, nil
}

func (o *cgOpts) doDescribe(ctx context.Context, adm *client.Admin) error {
	views := 0
	for _, v := range []bool{o.members, o.offsets, o.state != ""} {
		if v {
			views++
		}
	}
	if views > 1 {
		return errors.New("give at most one of --offsets, --members, --state")
	}
	for _, g := range o.groups {
		d, err := o.describeGroup(ctx, adm, g)
		if err != nil {
			return err
		}
		if d == nil {
			continue
		}
		switch {
		case o.state != "":
			co := "-"
			if d.Coordinator != nil {
				co = fmt.Sprintf("%s  (%d)", d.Coordinator.Address, d.Coordinator.NodeId)
			}
			strategy := d.Protocol
			if strategy == "" {
				strategy = "-"
			}
			kafkaTable(o.out, []string{"GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"},
				[][]string{{g, co, strategy, d.State, strconv.Itoa(len(d.Members))}})
		case o.members:
			o.printMembers(d)
		default:
			if err := o.printOffsets(ctx, adm, d); err != nil {
				return err
			}
		}
	}
	return nil
}

func (o *cgOpts) printMembers(d *client.GroupDescription) {
	if len(d.Members) == 0 {
		return
	}
	headers := []string{"GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"}
	if o.verbose {
		headers = append(headers, "ASSIGNMENT")
	}
	var rows [][]string
	for _, m := range d.Members {
		r := []string{d.Group, m.MemberID, dash(m.ClientHost), dash(m.ClientID), strconv.Itoa(len(m.Assignment))}
		if o.verbose {
			r = append(r, assignmentText(m.Assignment))
		}
		rows = append(rows, r)
	}
	kafkaTable(o.out, headers, rows)
}

// assignmentText is Kafka's "t1(0,1),t2(3)", or "-".
func assignmentText(tps []client.TopicPartition) string {
	if len(tps) == 0 {
		return "-"
	}
	var parts []string
	var cur string
	var ps []string
	flush := func() {
		if cur != "" {
			parts = append(parts, cur+"("+strings.Join(ps, ",")+")")
		}
	}
	for _, tp := range tps {
		if tp.Topic != cur {
			flush()
			cur, ps = tp.Topic, nil
		}
		ps = append(ps, strconv.Itoa(int(tp.Partition)))
	}
	flush()
	return strings.Join(parts, ",")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// groupIsolation decides the end LAG is measured against: --isolation-level
// when given on the command line, else the level every member advertises,
// else --isolation-level's default. why says which.
func (o *cgOpts) groupIsolation(d *client.GroupDescription) (iso client.IsolationLevel, why string) {
	flag := client.ReadUncommitted
	if o.isolation == "read_committed" {
		flag = client.ReadCommitted
	}
	if o.cmd.Flags().Changed("isolation-level") {
		return flag, "--isolation-level"
	}
	if d != nil && len(d.Members) > 0 {
		known, same := true, true
		for _, m := range d.Members {
			known = known && m.IsolationKnown
			same = same && m.Isolation == d.Members[0].Isolation
		}
		switch {
		case known && same:
			return d.Members[0].Isolation, "advertised by the group's members"
		case known:
			return flag, "--isolation-level default: the members advertise different levels"
		}
		return flag, "--isolation-level default: the members do not advertise theirs"
	}
	return flag, "--isolation-level default: the group has no active members"
}

func isoName(iso client.IsolationLevel) string {
	if iso == client.ReadCommitted {
		return "read_committed"
	}
	return "read_uncommitted"
}

// endOf is the log end a consumer of iso can reach: the HW or the LSO.
func endOf(po client.PartitionOffsets, iso client.IsolationLevel) int64 {
	if iso == client.ReadCommitted {
		return po.LastStableOffset
	}
	return po.HighWatermark
}

func (o *cgOpts) printOffsets(ctx context.Context, adm *client.Admin, d *client.GroupDescription) error {
	committed, err := adm.GroupOffsets(ctx, d.Group, nil)
	if err != nil {
		return err
	}
	type owner struct{ id, host, client string }
	owners := map[client.TopicPartition]owner{}
	seen := map[client.TopicPartition]bool{}
	var tps []client.TopicPartition
	var idle [][]string // members with no partitions
	for _, m := range d.Members {
		for _, tp := range m.Assignment {
			owners[tp] = owner{m.MemberID, dash(m.ClientHost), dash(m.ClientID)}
			if !seen[tp] {
				seen[tp] = true
				tps = append(tps, tp)
			}
		}
		if len(m.Assignment) == 0 {
			idle = append(idle, []string{d.Group, "-", "-", "-", "-", "-", m.MemberID, dash(m.ClientHost), dash(m.ClientID)})
		}
	}
	for tp := range committed {
		if !seen[tp] {
			seen[tp] = true
			tps = append(tps, tp)
		}
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	iso, why := o.groupIsolation(d)
	ends := map[client.TopicPartition]client.PartitionOffsets{}
	if len(tps) > 0 {
		if ends, err = adm.ListOffsets(ctx, tps, client.OffsetLatest, iso); err != nil {
			return err
		}
	}
	mark := "high watermark"
	if iso == client.ReadCommitted {
		mark = "last stable offset"
	}
	fmt.Fprintf(o.errOut, "LAG of group '%s' is measured against the %s (%s, %s).\n", d.Group, mark, isoName(iso), why)
	var rows [][]string
	for _, tp := range tps {
		cur, end, lag := "-", "-", "-"
		po, ok := ends[tp]
		if ok && po.Err == nil {
			end = strconv.FormatInt(endOf(po, iso), 10)
		}
		if c, has := committed[tp]; has {
			cur = strconv.FormatInt(c, 10)
			if ok && po.Err == nil {
				lag = strconv.FormatInt(endOf(po, iso)-c, 10)
			}
		}
		ow, owned := owners[tp]
		if !owned {
			ow = owner{"-", "-", "-"}
		}
		rows = append(rows, []string{d.Group, tp.Topic, strconv.Itoa(int(tp.Partition)), cur, end, lag, ow.id, ow.host, ow.client})
	}
	rows = append(rows, idle...)
	if len(rows) == 0 {
		return nil
	}
	kafkaTable(o.out, []string{"GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"}, rows)
	return nil
}

// topicPartitions expands --topic t[:p1,p2] (all of t's partitions when
// none are named); with --all-topics, the partitions the group has
// offsets for.
func (o *cgOpts) topicPartitions(ctx context.Context, adm *client.Admin, committed map[client.TopicPartition]int64) ([]client.TopicPartition, error) {
	var out []client.TopicPartition
	if o.allTopics {
		for tp := range committed {
			out = append(out, tp)
		}
	}
	for _, s := range o.topics {
		topic, parts, named := strings.Cut(s, ":")
		if topic == "" {
			return nil, fmt.Errorf("--topic %q: no topic name", s)
		}
		if named {
			for _, p := range strings.Split(parts, ",") {
				n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("--topic %q: bad partition %q", s, p)
				}
				out = append(out, client.TopicPartition{Topic: topic, Partition: int32(n)})
			}
			continue
		}
		md, err := adm.Metadata(ctx, false, topic)
		if err != nil {
			return nil, err
		}
		for _, t := range md.Topics {
			if t.Name != topic {
				continue
			}
			if err := errs.FromCode(t.ErrorCode, ""); err != nil {
				return nil, fmt.Errorf("topic %s: %w", topic, err)
			}
			for _, p := range t.Partitions {
				out = append(out, client.TopicPartition{Topic: topic, Partition: p.Partition})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out, nil
}

// parseDatetime reads --to-datetime: YYYY-MM-DDTHH:mm:SS[.sss], in the
// local time zone (as kafka-consumer-groups reads it) unless a zone (Z,
// ±hh:mm) follows.
func parseDatetime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05.000", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--to-datetime %q: want YYYY-MM-DDTHH:mm:SS.sss, optionally followed by Z or ±hh:mm", s)
}

func (o *cgOpts) doReset(ctx context.Context, adm *client.Admin) error {
	f := o.cmd.Flags()
	n := 0
	for _, s := range []string{"to-earliest", "to-latest", "to-datetime", "shift-by", "to-offset"} {
		if f.Changed(s) {
			n++
		}
	}
	if n != 1 {
		return errors.New("--reset-offsets needs exactly one of --to-earliest, --to-latest, --to-datetime, --shift-by, --to-offset")
	}
	if (len(o.topics) == 0) == !o.allTopics {
		return errors.New("--reset-offsets needs --topic or --all-topics")
	}
	if o.dryRun && o.execute {
		return errors.New("give --dry-run or --execute, not both")
	}
	if !o.dryRun && !o.execute {
		fmt.Fprintln(o.errOut, "WARN: No action will be performed as the --execute option is missing. Add --execute to reset the offsets; --dry-run only shows them.")
	}
	var ts int64
	if o.toDatetime != "" {
		t, err := parseDatetime(o.toDatetime)
		if err != nil {
			return err
		}
		ts = t.UnixMilli()
	}
	iso := client.ReadUncommitted
	if o.isolation == "read_committed" {
		iso = client.ReadCommitted
	}
	for _, g := range o.groups {
		d, err := adm.DescribeGroup(ctx, g)
		if err != nil {
			return err
		}
		if d.State != "Empty" && d.State != "Dead" {
			return fmt.Errorf("Assignments can only be reset if the group '%s' is inactive, but the current state is %s.", g, d.State)
		}
		committed, err := adm.GroupOffsets(ctx, g, nil)
		if err != nil {
			return err
		}
		tps, err := o.topicPartitions(ctx, adm, committed)
		if err != nil {
			return err
		}
		if len(tps) == 0 {
			continue
		}
		bounds, err := listOffsetsOK(ctx, adm, tps, client.OffsetLatest, iso)
		if err != nil {
			return err
		}
		var byTime map[client.TopicPartition]client.PartitionOffsets
		if o.toDatetime != "" {
			if byTime, err = listOffsetsOK(ctx, adm, tps, ts, iso); err != nil {
				return err
			}
		}
		next := map[client.TopicPartition]int64{}
		var rows [][]string
		for _, tp := range tps {
			b := bounds[tp]
			lo, hi := b.LogStartOffset, endOf(b, iso)
			var want int64
			switch {
			case o.toEarliest:
				want = lo
			case o.toLatest:
				want = hi
			case o.toDatetime != "":
				if want = byTime[tp].Offset; want < 0 {
					want = hi // no record at or after the time
				}
			case f.Changed("to-offset"):
				want = o.toOffset
			default:
				c, ok := committed[tp]
				if !ok {
					return fmt.Errorf("cannot shift the offset of %s-%d: group '%s' has no committed offset for it", tp.Topic, tp.Partition, g)
				}
				want = shiftOffset(c, o.shiftBy)
			}
			switch {
			case want < lo:
				fmt.Fprintf(o.errOut, "New offset (%d) is lower than earliest offset for topic partition %s-%d. Value will be set to %d\n", want, tp.Topic, tp.Partition, lo)
				want = lo
			case want > hi:
				fmt.Fprintf(o.errOut, "New offset (%d) is higher than latest offset for topic partition %s-%d. Value will be set to %d\n", want, tp.Topic, tp.Partition, hi)
				want = hi
			}
			next[tp] = want
			rows = append(rows, []string{g, tp.Topic, strconv.Itoa(int(tp.Partition)), strconv.FormatInt(want, 10)})
		}
		var failed int
		if o.execute {
			res, err := adm.SetGroupOffsets(ctx, g, next)
			if err != nil {
				return err
			}
			// Every refused partition is reported, not only the first.
			for _, tp := range tps {
				if e := res[tp]; e != nil {
					failed++
					fmt.Fprintf(o.errOut, "Error: offset of partition %s-%d of group '%s' could not be reset due to: %v\n", tp.Topic, tp.Partition, g, e)
				}
			}
		}
		kafkaTable(o.out, []string{"GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"}, rows)
		if failed > 0 {
			return fmt.Errorf("%d of %d partitions of group '%s' could not be reset", failed, len(tps), g)
		}
	}
	return nil
}

// shiftOffset is --shift-by's c + by, saturating at the int64 bounds
// instead of wrapping (a shift of math.MaxInt64 is past the log end, not
// below the log start); the caller clamps it to [log start, log end].
func shiftOffset(c, by int64) int64 {
	switch {
	case by > 0 && c > math.MaxInt64-by:
		return math.MaxInt64
	case by < 0 && c < math.MinInt64-by:
		return math.MinInt64
	}
	return c + by
}

// listOffsetsOK is ListOffsets that fails on any partition's error.
func listOffsetsOK(ctx context.Context, adm *client.Admin, tps []client.TopicPartition, ts int64, iso client.IsolationLevel) (map[client.TopicPartition]client.PartitionOffsets, error) {
	m, err := adm.ListOffsets(ctx, tps, ts, iso)
	if err != nil {
		return nil, err
	}
	for _, tp := range tps {
		if po, ok := m[tp]; !ok || po.Err != nil {
			return nil, fmt.Errorf("offsets of %s-%d: %v", tp.Topic, tp.Partition, po.Err)
		}
	}
	return m, nil
}

func (o *cgOpts) doDelete(ctx context.Context, adm *client.Admin) error {
	res, err := adm.DeleteGroups(ctx, o.groups...)
	if err != nil {
		return err
	}
	var ok, failed []string
	for _, g := range o.groups {
		if e := res[g]; e != nil {
			failed = append(failed, fmt.Sprintf("* Group '%s' could not be deleted due to: %v", g, e))
		} else {
			ok = append(ok, "'"+g+"'")
		}
	}
	if len(failed) == 0 {
		fmt.Fprintf(o.out, "Deletion of requested consumer groups (%s) was successful.\n", strings.Join(ok, ", "))
		return nil
	}
	if len(ok) > 0 {
		fmt.Fprintf(o.out, "These consumer groups were deleted successfully: %s\n", strings.Join(ok, ", "))
	}
	fmt.Fprintf(o.out, "Deletion of some consumer groups failed:\n%s\n", strings.Join(failed, "\n"))
	return fmt.Errorf("%d of %d groups were not deleted", len(failed), len(o.groups))
}

func (o *cgOpts) doDeleteOffsets(ctx context.Context, adm *client.Admin) error {
	if len(o.groups) != 1 {
		return errors.New("--delete-offsets takes one --group")
	}
	if len(o.topics) == 0 {
		return errors.New("--delete-offsets needs --topic")
	}
	g := o.groups[0]
	tps, err := o.topicPartitions(ctx, adm, nil)
	if err != nil {
		return err
	}
	res, err := adm.DeleteGroupOffsets(ctx, g, tps)
	if err != nil {
		return err
	}
	var rows [][]string
	failed := 0
	for _, tp := range tps {
		status := "Successful"
		if e, ok := res[tp]; !ok {
			status = "Error: no answer"
			failed++
		} else if e != nil {
			status = "Error: " + errs.CodeOf(e).String()
			failed++
		}
		rows = append(rows, []string{tp.Topic, strconv.Itoa(int(tp.Partition)), status})
	}
	if failed == 0 {
		fmt.Fprintf(o.out, "Request succeeded for deleting offsets from group %s.\n", g)
	} else {
		fmt.Fprintf(o.out, "Request failed for deleting offsets of %d partitions from group %s.\n", failed, g)
	}
	kafkaTable(o.out, []string{"TOPIC", "PARTITION", "STATUS"}, rows)
	if failed > 0 {
		return fmt.Errorf("%d partitions' offsets were not deleted", failed)
	}
	return nil
}
