package client

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/strand-io/strand/errs"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/testkit/fakebroker"
	"github.com/strand-io/strand/testkit/testutil"
)

// The error contract of the SDK (doc.go): an error that carries a broker
// code matches that code's sentinel with errors.Is and gives it with
// errors.As(err, &e *Error), names it once in its message, and Classify
// puts it in Kafka's class; a call that ended because its ctx or one of
// the client's timeouts ran out matches context.DeadlineExceeded (or
// context.Canceled) and still carries the code it was retrying.
//
// TestErrorContract checks it through every public call that can fail,
// for every code a broker can answer: the fake broker (testkit/fakebroker)
// answers the call's RPC with the code, every time (Broker.Refuse).

// outcome is how a call ends when its RPC is answered with a code.
type outcome int

const (
	// answered: the call fails at once with the code.
	answered outcome = iota
	// timedOut: the call retries the code until its time is up.
	timedOut
	// absorbed: the SDK handles the code itself; the call succeeds, or
	// (Poll) returns nothing until its ctx ends.
	absorbed
)

func (o outcome) String() string {
	return [...]string{"answered", "timed out", "absorbed"}[o]
}

// contractCase is one public call made to fail.
type contractCase struct {
	name string
	fail string // the RPC that answers the code (fakebroker.Broker.Refuse)
	// clientTimeouts: the call is bounded by the client's own timeouts
	// (max.block.ms, delivery.timeout.ms); its ctx gets three times as long
	// so that those end it.
	clientTimeouts bool
	run            func(ctx context.Context, opts []Opt) error
	outcome        func(pb.ErrorCode) outcome
	// class is the Category Classify must give (nil: the error table's,
	// Retriable for a call that timed out).
	class func(pb.ErrorCode, outcome) Category
}

func retriable(c pb.ErrorCode) bool { return errs.IsRetriable(&errs.Error{Code: c}) }

func tableCategory(c pb.ErrorCode) Category { return errs.CategoryOf(&errs.Error{Code: c}) }

// retriedIfRetriable: the call retries every retriable code.
func retriedIfRetriable(c pb.ErrorCode) outcome {
	if retriable(c) {
		return timedOut
	}
	return answered
}

// retriedOnly: the call retries exactly these codes.
func retriedOnly(codes ...pb.ErrorCode) func(pb.ErrorCode) outcome {
	return func(c pb.ErrorCode) outcome {
		for _, r := range codes {
			if r == c {
				return timedOut
			}
		}
		return answered
	}
}

func alwaysAnswered(pb.ErrorCode) outcome { return answered }

// pollAbsorbs: Poll keeps going through retriable codes (and these), as
// Kafka's poll does, and returns the others.
func pollAbsorbs(extra ...pb.ErrorCode) func(pb.ErrorCode) outcome {
	return func(c pb.ErrorCode) outcome {
		if retriable(c) {
			return absorbed
		}
		for _, e := range extra {
			if e == c {
				return absorbed
			}
		}
		return answered
	}
}

// groupCallOutcome: the group coordinator's calls retry retriable codes
// until ctx ends, except those the consumer acts on.
func groupCallOutcome(c pb.ErrorCode) outcome {
	if c == pb.ErrorCode_REBALANCE_IN_PROGRESS || c == pb.ErrorCode_MEMBER_ID_REQUIRED {
		return answered
	}
	return retriedIfRetriable(c)
}

// endTxnClass: how a failed EndTxn of a commit classifies. An answer lost
// or refused retriably after sending is ErrCommitOutcomeUnknown (class
// CommitOutcomeUnknown: retry the commit), as is UNKNOWN_SERVER_ERROR.
func endTxnClass(c pb.ErrorCode, o outcome) Category {
	switch {
	case c == pb.ErrorCode_PRODUCER_FENCED:
		return ApplicationRecoverable
	case c == pb.ErrorCode_TRANSACTION_TIMED_OUT:
		return Abortable
	case o == timedOut || c == pb.ErrorCode_UNKNOWN_SERVER_ERROR:
		return CommitOutcomeUnknown
	}
	return tableCategory(c)
}

func closeProducer(p *Producer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.Close(ctx)
}

// closeNow closes p without waiting for its records.
func closeNow(p *Producer) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Close(ctx)
}

func closeConsumer(c *Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Close(ctx)
}

// pollUntilError polls until Poll fails; a Poll that returns nil after its
// ctx ended is reported as a plain error (it should have said why).
func pollUntilError(ctx context.Context, c *Consumer) error {
	for {
		// Whether ctx had ended before the call: one that ends while Poll
		// returns its empty answer is no fault of Poll's (it failed CI
		// once, the deadline passing between Poll's return and a check
		// made after it).
		ended := ctx.Err() != nil
		if _, err := c.Poll(ctx); err != nil {
			return err
		}
		if ended {
			return errors.New("Poll returned no error though its ctx had ended before the call")
		}
	}
}

var tp0 = TopicPartition{Topic: "t", Partition: 0}

func withTxn(ctx context.Context, opts []Opt, f func(p *Producer) error) error {
	p, err := NewProducer(append(opts, TransactionalID("tx"))...)
	if err != nil {
		return fmt.Errorf("setup: %v", err)
	}
	defer closeProducer(p)
	if err := p.InitTransactions(ctx); err != nil {
		return err
	}
	if err := p.BeginTransaction(); err != nil {
		return err
	}
	return f(p)
}

func withConsumer(opts []Opt, f func(c *Consumer) error) error {
	c, err := NewConsumer(opts...)
	if err != nil {
		return fmt.Errorf("setup: %v", err)
	}
	defer closeConsumer(c)
	return f(c)
}

func withAdmin(opts []Opt, f func(a *Admin) error) error {
	a, err := NewAdmin(opts...)
	if err != nil {
		return fmt.Errorf("setup: %v", err)
	}
	defer a.Close()
	return f(a)
}

func produceOne(ctx context.Context, p *Producer) error {
	return p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("v")}).FirstErr()
}

var contractCases = []contractCase{
	{name: "Producer.ProduceSync", fail: "Produce", clientTimeouts: true,
		run: func(ctx context.Context, opts []Opt) error {
			p, err := NewProducer(opts...)
			if err != nil {
				return fmt.Errorf("setup: %v", err)
			}
			defer closeProducer(p)
			return produceOne(ctx, p)
		},
		outcome: func(c pb.ErrorCode) outcome {
			switch c {
			case pb.ErrorCode_DUPLICATE_SEQUENCE_NUMBER:
				return absorbed // the batch was written before
			case pb.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, pb.ErrorCode_UNKNOWN_PRODUCER_ID:
				return timedOut // a new producer id, and again
			}
			return retriedIfRetriable(c)
		}},
	{name: "Producer.Produce/topic metadata", fail: "Metadata", clientTimeouts: true,
		run: func(ctx context.Context, opts []Opt) error {
			p, err := NewProducer(opts...)
			if err != nil {
				return fmt.Errorf("setup: %v", err)
			}
			defer closeProducer(p)
			done := make(chan error, 1)
			p.Produce(ctx, &Record{Topic: "t", Value: []byte("v")}, func(_ *Record, err error) { done <- err })
			return <-done
		},
		outcome: retriedIfRetriable},
	{name: "Producer.InitTransactions", fail: "InitProducerId", clientTimeouts: true,
		run: func(ctx context.Context, opts []Opt) error {
			return withTxn(ctx, opts, func(*Producer) error { return nil })
		},
		outcome: retriedIfRetriable},
	{name: "Producer.InitTransactions/FindCoordinator", fail: "FindCoordinator", clientTimeouts: true,
		run: func(ctx context.Context, opts []Opt) error {
			return withTxn(ctx, opts, func(*Producer) error { return nil })
		},
		outcome: retriedIfRetriable},
	{name: "Producer.SendOffsetsToTransaction", fail: "TxnOffsetCommit", clientTimeouts: true,
		run: func(ctx context.Context, opts []Opt) error {
			return withTxn(ctx, opts, func(p *Producer) error {
				return p.SendOffsetsToTransaction(ctx, map[TopicPartition]int64{tp0: 1}, GroupMetadata{GroupID: "g", GenerationID: -1})
			})
		},
		outcome: retriedIfRetriable,
		// Any failure but fencing or a fatal answer dooms the transaction.
		class: func(c pb.ErrorCode, o outcome) Category {
			switch {
			case c == pb.ErrorCode_PRODUCER_FENCED:
				return ApplicationRecoverable
			case o == answered && tableCategory(c) == Fatal && c != pb.ErrorCode_UNKNOWN_SERVER_ERROR:
				return Fatal
			}
			return Abortable
		}},
	{name: "Producer.CommitTransaction", fail: "EndTxn", clientTimeouts: true,
		run: func(ctx context.Context, opts []Opt) error {
			return withTxn(ctx, opts, func(p *Producer) error {
				if err := produceOne(ctx, p); err != nil {
					return fmt.Errorf("setup: %v", err)
				}
				return p.CommitTransaction(ctx)
			})
		},
		outcome: retriedIfRetriable, class: endTxnClass},
	{name: "Producer.AbortTransaction", fail: "EndTxn", clientTimeouts: true,
		run: func(ctx context.Context, opts []Opt) error {
			return withTxn(ctx, opts, func(p *Producer) error {
				if err := produceOne(ctx, p); err != nil {
					return fmt.Errorf("setup: %v", err)
				}
				return p.AbortTransaction(ctx)
			})
		},
		outcome: retriedIfRetriable},
	{name: "Producer.CommitTransaction/failed record", fail: "Produce", clientTimeouts: true,
		run: func(ctx context.Context, opts []Opt) error {
			return withTxn(ctx, opts, func(p *Producer) error {
				produceOne(ctx, p)
				return p.CommitTransaction(ctx)
			})
		},
		outcome: func(c pb.ErrorCode) outcome {
			if c == pb.ErrorCode_DUPLICATE_SEQUENCE_NUMBER {
				return absorbed
			}
			return retriedIfRetriable(c)
		},
		// A failed record dooms the transaction; a fenced producer can
		// only be closed.
		class: func(c pb.ErrorCode, _ outcome) Category {
			if c == pb.ErrorCode_PRODUCER_FENCED {
				return ApplicationRecoverable
			}
			return Abortable
		}},
	{name: "TransactSession.End", fail: "EndTxn", clientTimeouts: true,
		run: func(ctx context.Context, opts []Opt) error {
			s, err := NewTransactSession(ctx, append(opts, GroupID("g"), Topics("t"), TransactionalID("tx"))...)
			if err != nil {
				return fmt.Errorf("setup: %v", err)
			}
			defer func() {
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s.Close(cctx)
			}()
			if err := s.Begin(); err != nil {
				return fmt.Errorf("setup: %v", err)
			}
			if err := produceOne(ctx, s.Producer()); err != nil {
				return fmt.Errorf("setup: %v", err)
			}
			_, err = s.End(ctx, TryCommit)
			return err
		},
		// End aborts after an abortable commit; an expired producer id
		// (INVALID_PRODUCER_ID_MAPPING) is aborted by asking for a new
		// one, which succeeds: the session carries on.
		outcome: func(c pb.ErrorCode) outcome {
			if c == pb.ErrorCode_INVALID_PRODUCER_ID_MAPPING {
				return absorbed
			}
			return retriedIfRetriable(c)
		}, class: endTxnClass},
	{name: "TransactSession.End/offsets", fail: "TxnOffsetCommit", clientTimeouts: true,
		run: func(ctx context.Context, opts []Opt) error {
			s, err := NewTransactSession(ctx, append(opts, GroupID("g"), Topics("t"), TransactionalID("tx"))...)
			if err != nil {
				return fmt.Errorf("setup: %v", err)
			}
			defer func() {
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s.Close(cctx)
			}()
			if err := s.Begin(); err != nil {
				return fmt.Errorf("setup: %v", err)
			}
			if err := produceOne(ctx, s.Producer()); err != nil {
				return fmt.Errorf("setup: %v", err)
			}
			_, err = s.End(ctx, TryCommit)
			return err
		},
		// End aborts instead, unless the producer can only be closed.
		outcome: func(c pb.ErrorCode) outcome {
			if c == pb.ErrorCode_PRODUCER_FENCED || (tableCategory(c) == Fatal && c != pb.ErrorCode_UNKNOWN_SERVER_ERROR && !retriable(c)) {
				return answered
			}
			return absorbed
		}},
	{name: "Consumer.Poll/Fetch", fail: "Fetch",
		run: func(ctx context.Context, opts []Opt) error {
			return withConsumer(opts, func(c *Consumer) error {
				c.Assign(map[TopicPartition]int64{tp0: 0})
				return pollUntilError(ctx, c)
			})
		},
		outcome: pollAbsorbs(pb.ErrorCode_OFFSET_OUT_OF_RANGE)},
	{name: "Consumer.Poll/Fetch response", fail: "FetchTop",
		run: func(ctx context.Context, opts []Opt) error {
			return withConsumer(opts, func(c *Consumer) error {
				c.Assign(map[TopicPartition]int64{tp0: 0})
				return pollUntilError(ctx, c)
			})
		},
		outcome: pollAbsorbs()},
	{name: "Consumer.Poll/ListOffsets", fail: "ListOffsets",
		run: func(ctx context.Context, opts []Opt) error {
			return withConsumer(opts, func(c *Consumer) error {
				c.Assign(map[TopicPartition]int64{tp0: OffsetEarliest})
				return pollUntilError(ctx, c)
			})
		},
		outcome: pollAbsorbs()},
	{name: "Consumer.Poll/JoinGroup", fail: "JoinGroup",
		run: func(ctx context.Context, opts []Opt) error {
			return withConsumer(append(opts, GroupID("g"), Topics("t")), func(c *Consumer) error { return pollUntilError(ctx, c) })
		},
		outcome: pollAbsorbs(pb.ErrorCode_UNKNOWN_MEMBER_ID, pb.ErrorCode_ILLEGAL_GENERATION)},
	{name: "Consumer.Poll/SyncGroup", fail: "SyncGroup",
		run: func(ctx context.Context, opts []Opt) error {
			return withConsumer(append(opts, GroupID("g"), Topics("t")), func(c *Consumer) error { return pollUntilError(ctx, c) })
		},
		outcome: pollAbsorbs(pb.ErrorCode_UNKNOWN_MEMBER_ID, pb.ErrorCode_ILLEGAL_GENERATION)},
	{name: "Consumer.CommitOffsets", fail: "OffsetCommit",
		run: func(ctx context.Context, opts []Opt) error {
			return withConsumer(append(opts, GroupID("g")), func(c *Consumer) error {
				return c.CommitOffsets(ctx, map[TopicPartition]int64{tp0: 1})
			})
		},
		outcome: groupCallOutcome},
	{name: "Consumer.Committed", fail: "OffsetFetch",
		run: func(ctx context.Context, opts []Opt) error {
			return withConsumer(append(opts, GroupID("g")), func(c *Consumer) error {
				_, err := c.Committed(ctx, []TopicPartition{tp0})
				return err
			})
		},
		outcome: groupCallOutcome},
	{name: "Admin.CreateTopic", fail: "CreateTopics",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error {
				return a.CreateTopic(ctx, TopicSpec{Name: "n", Partitions: 1, ReplicationFactor: 1})
			})
		},
		outcome: retriedOnly(pb.ErrorCode_NOT_CONTROLLER, pb.ErrorCode_REQUEST_TIMED_OUT, pb.ErrorCode_BROKER_NOT_AVAILABLE)},
	{name: "Admin.DeleteTopic", fail: "DeleteTopics",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error { return a.DeleteTopic(ctx, "n") })
		},
		outcome: retriedOnly(pb.ErrorCode_NOT_CONTROLLER, pb.ErrorCode_BROKER_NOT_AVAILABLE)},
	{name: "Admin.DescribeTopicConfigs", fail: "DescribeConfigs",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error {
				_, err := a.DescribeTopicConfigs(ctx, "t")
				return err
			})
		},
		outcome: alwaysAnswered},
	{name: "Admin.DescribeBrokerConfigs", fail: "DescribeConfigs",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error {
				_, err := a.DescribeBrokerConfigs(ctx, BrokerDefault)
				return err
			})
		},
		outcome: alwaysAnswered},
	{name: "Admin.AlterTopicConfigs", fail: "IncrementalAlterConfigs",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error {
				return a.AlterTopicConfigs(ctx, "t", map[string]string{"retention.ms": "1000"})
			})
		},
		outcome: retriedOnly(pb.ErrorCode_NOT_CONTROLLER, pb.ErrorCode_REQUEST_TIMED_OUT, pb.ErrorCode_BROKER_NOT_AVAILABLE)},
	{name: "Admin.ListOffsets", fail: "ListOffsets",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error {
				res, err := a.ListOffsets(ctx, []TopicPartition{tp0}, OffsetLatest, ReadUncommitted)
				if err != nil {
					return err
				}
				return res[tp0].Err
			})
		},
		outcome: retriedIfRetriable},
	{name: "Admin.CommittedOffsets", fail: "OffsetFetch",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error {
				_, err := a.CommittedOffsets(ctx, "g", []TopicPartition{tp0})
				return err
			})
		},
		outcome: retriedIfRetriable},
	{name: "Admin.ListTransactions", fail: "ListTransactions",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error {
				_, err := a.ListTransactions(ctx, ListTransactionsFilter{})
				return err
			})
		},
		outcome: retriedIfRetriable},
	{name: "Admin.FindCoordinator", fail: "FindCoordinator",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error {
				_, err := a.FindCoordinator(ctx, pb.CoordinatorType_GROUP, "g")
				return err
			})
		},
		outcome: alwaysAnswered},
	{name: "Admin.DescribeTransaction", fail: "DescribeTransactions",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error {
				_, err := a.DescribeTransaction(ctx, "tx")
				return err
			})
		},
		outcome: alwaysAnswered},
	{name: "Admin.DescribeProducers", fail: "DescribeProducers",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error {
				_, err := a.DescribeProducers(ctx, tp0, -1)
				return err
			})
		},
		outcome: alwaysAnswered},
	{name: "Admin.AbortTransaction", fail: "AbortTransaction",
		run: func(ctx context.Context, opts []Opt) error {
			return withAdmin(opts, func(a *Admin) error { return a.AbortTransaction(ctx, tp0, 0) })
		},
		outcome: alwaysAnswered},
}

// allCodes is every error code a broker can answer.
func allCodes() []pb.ErrorCode {
	var out []pb.ErrorCode
	for v := range pb.ErrorCode_name {
		if c := pb.ErrorCode(v); c != pb.ErrorCode_NONE {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// namesCodeOnce reports whether msg names code exactly once, as a word
// (LEADER_NOT_AVAILABLE is not in PREFERRED_LEADER_NOT_AVAILABLE).
func namesCodeOnce(msg string, code pb.ErrorCode) bool {
	re := regexp.MustCompile(`(^|[^A-Z_])` + code.String() + `([^A-Z_]|$)`)
	return len(re.FindAllStringIndex(msg, -1)) == 1
}

// contractResult is one call's outcome.
type contractResult struct {
	err      error
	answered int64 // how often the broker answered the code
	took     time.Duration
}

// runContract makes c's call fail with code, bounding it by d.
func runContract(c contractCase, code pb.ErrorCode, d time.Duration) contractResult {
	b, err := fakebroker.Listen(codeTopic)
	if err != nil {
		return contractResult{err: fmt.Errorf("setup: %v", err)}
	}
	defer b.Close()
	b.Refuse(c.fail, code)
	opts := []Opt{Bootstrap(b.Addr()), Logger(testutil.Logger()), RetryBackoff(5*time.Millisecond, 20*time.Millisecond),
		RequestTimeout(d), MaxBlock(d), DeliveryTimeout(d), Linger(0), FetchMaxWait(20 * time.Millisecond),
		HeartbeatInterval(50 * time.Millisecond), SessionTimeout(10 * time.Second)}
	cd := d
	if c.clientTimeouts {
		cd = 3 * d
	}
	ctx, cancel := context.WithTimeout(context.Background(), cd)
	defer cancel()
	start := time.Now()
	err = c.run(ctx, opts)
	return contractResult{err: err, answered: b.Refusals(), took: time.Since(start)}
}

// codeTopic is the one topic of the brokers the error tests run against.
var codeTopic = fakebroker.Topic{Name: "t", MaxMessageBytes: 1 << 20}

// How long a call may retry a code before its timeout ends it; a call
// expected to fail at once gets much longer, so that a call that retries
// when it should not shows up as a timeout.
const (
	contractRetryTime  = 500 * time.Millisecond
	contractAnswerTime = 20 * time.Second
)

func TestErrorContract(t *testing.T) {
	codes := allCodes()
	type key struct {
		c    int
		code pb.ErrorCode
	}
	results := map[key]contractResult{}
	var mu sync.Mutex
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for ci, c := range contractCases {
		for _, code := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				o := c.outcome(code)
				d := contractAnswerTime
				if o != answered {
					d = contractRetryTime
				}
				r := runContract(c, code, d)
				// A call that did not get the code before its time ran out
				// (a slow start on a busy machine) proves nothing: again,
				// with more time. Two answers mean the call got the first
				// (it asks again only once it has an answer). The same for
				// any call the broker never answered with the code: its
				// set-up (InitTransactions, a first metadata request) ran
				// out of time before the call under test was made.
				for try := 0; ((o == timedOut && r.answered < 2) || r.answered == 0) && try < 2; try++ {
					d *= 4
					r = runContract(c, code, d)
				}
				mu.Lock()
				results[key{ci, code}] = r
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for ci, c := range contractCases {
		t.Run(c.name, func(t *testing.T) {
			for _, code := range codes {
				o := c.outcome(code)
				r := results[key{ci, code}]
				class := Retriable
				if c.class != nil {
					class = c.class(code, o)
				} else if o == answered {
					class = tableCategory(code)
				}
				if msg := checkContract(r.err, code, o, class); msg != "" {
					t.Errorf("%s answered %s (%s, after %v): %s\n\terr: %v", c.fail, code, o, r.took.Round(time.Millisecond), msg, r.err)
				}
			}
		})
	}
}

// checkContract returns what is wrong with err, the outcome of a call
// whose RPC was answered code, or "".
func checkContract(err error, code pb.ErrorCode, o outcome, class Category) string {
	if o == absorbed {
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return "the SDK should have handled this code (success, or nothing until ctx ended)"
		}
		return ""
	}
	if err == nil {
		return "no error"
	}
	var problems []string
	if dl := errors.Is(err, context.DeadlineExceeded); dl != (o == timedOut) {
		problems = append(problems, fmt.Sprintf("errors.Is(err, context.DeadlineExceeded) = %v", dl))
	}
	if !errors.Is(err, &Error{Code: code}) {
		problems = append(problems, "errors.Is(err, the code's sentinel) = false")
	}
	var e *Error
	if !errors.As(err, &e) {
		problems = append(problems, "errors.As(err, *Error) = false")
	} else if e.Code != code {
		problems = append(problems, fmt.Sprintf("errors.As(err, *Error) gives %s", e.Code))
	}
	if got := Classify(err); got != class {
		problems = append(problems, fmt.Sprintf("Classify = %v, want %v", got, class))
	}
	if !namesCodeOnce(err.Error(), code) {
		problems = append(problems, "the message does not name the code exactly once")
	}
	if len(problems) == 0 {
		return ""
	}
	return fmt.Sprint(problems)
}
