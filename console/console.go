// Package console is the web console every node serves on its HTTP
// listener (next to /metrics): plain server-rendered pages, refreshed by
// the browser, that show the cluster, topics and their partitions (HW,
// LSO and who holds the LSO), groups and their lag, running reassignments
// and transactions. It only reads: every page is built from the node's
// metadata image and from the client requests (ListOffsets,
// DescribeProducers, ListTransactions, DescribeTransactions, ListGroups,
// DescribeGroups, OffsetFetch) it sends to each broker's client listener,
// so any node, controller-only ones included, can serve it. Each page is
// built within Config.Timeout: a broker that does not answer shows as an
// error on the page, never as a hung request. The listener has no
// authentication, so what requests cost the brokers is bounded (limit.go):
// at most two pages gather at once, a page being gathered is gathered
// once for every request waiting on it, a gathered page is served again
// for a second, ?refresh is clamped, and tables show at most 500 rows.
package console

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/strand-io/strand/metadata"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

//go:embed templates/*.html
var templateFS embed.FS

// BrokerAPI is what the console asks of one broker: the generated gRPC
// clients of its Consumer, Transactions and Groups services satisfy it.
type BrokerAPI interface {
	ListOffsets(ctx context.Context, in *pb.ListOffsetsRequest, opts ...grpc.CallOption) (*pb.ListOffsetsResponse, error)
	DescribeProducers(ctx context.Context, in *pb.DescribeProducersRequest, opts ...grpc.CallOption) (*pb.DescribeProducersResponse, error)
	ListTransactions(ctx context.Context, in *pb.ListTransactionsRequest, opts ...grpc.CallOption) (*pb.ListTransactionsResponse, error)
	DescribeTransactions(ctx context.Context, in *pb.DescribeTransactionsRequest, opts ...grpc.CallOption) (*pb.DescribeTransactionsResponse, error)
	ListGroups(ctx context.Context, in *pb.ListGroupsRequest, opts ...grpc.CallOption) (*pb.ListGroupsResponse, error)
	DescribeGroups(ctx context.Context, in *pb.DescribeGroupsRequest, opts ...grpc.CallOption) (*pb.DescribeGroupsResponse, error)
	OffsetFetch(ctx context.Context, in *pb.OffsetFetchRequest, opts ...grpc.CallOption) (*pb.OffsetFetchResponse, error)
}

// grpcBroker is BrokerAPI over one client connection.
type grpcBroker struct {
	pb.ConsumerClient
	pb.TransactionsClient
	pb.GroupsClient
}

// GRPCBroker returns the BrokerAPI of the broker at the other end of cc.
func GRPCBroker(cc grpc.ClientConnInterface) BrokerAPI {
	return grpcBroker{pb.NewConsumerClient(cc), pb.NewTransactionsClient(cc), pb.NewGroupsClient(cc)}
}

// Voter is one controller-quorum voter.
type Voter struct {
	ID   int32
	Addr string
}

// Config is what a node hands its console.
type Config struct {
	// NodeID is the serving node's id.
	NodeID int32
	// Image returns the newest metadata image the node holds (nil: none yet).
	Image func() *metadata.Image
	// ActiveController returns the active controller's id (-1: unknown).
	ActiveController func() int32
	// Voters are the controller quorum's voters as configured
	// (--controller-voters).
	Voters []Voter
	// CurrentVoters, if set, reports the quorum's current voters (they
	// change with AddVoter and RemoveVoter); when it reports some, the
	// page shows them instead of Voters.
	CurrentVoters func() []Voter
	// Broker returns the API of a broker, reached at its client address.
	Broker func(b *metadata.Broker) (BrokerAPI, error)
	// FollowerLogEnds, if set, reports the followers' log ends of a
	// partition this node leads (replication.Manager.FollowerLogEnds): a
	// reassignment's adding replicas show how far they have come when the
	// page is served by the partition's leader.
	FollowerLogEnds func(topic string, partition int32) (followers map[int32]int64, leaderEnd int64, ok bool)
	// Timeout bounds the building of one page (default 3s); a request
	// that finds every gather slot taken waits at most half of it, then
	// gets 503 with Retry-After.
	Timeout time.Duration
	// Now is the clock ages are measured with (default time.Now).
	Now func() time.Time
	// Logger logs what a page could not gather (default slog.Default).
	Logger *slog.Logger
}

// DefaultRefresh is the refresh interval, in seconds, of a page asked
// for without ?refresh= (0 turns refreshing off; other values are
// clamped to MinRefresh..MaxRefresh).
const DefaultRefresh = 5

// Console serves the pages.
type Console struct {
	cfg   Config
	pages map[string]*template.Template
	mux   *http.ServeMux
	g     *gatherer
}

var pageNames = []string{"cluster", "topics", "topic", "partition", "groups", "group", "reassignments", "transactions", "notfound"}

// New returns a console; it panics if its embedded templates do not parse.
func New(cfg Config) *Console {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 3 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ActiveController == nil {
		cfg.ActiveController = func() int32 { return -1 }
	}
	c := &Console{cfg: cfg, pages: map[string]*template.Template{}, g: newGatherer()}
	funcs := template.FuncMap{
		"ids":      joinIDs,
		"pathEsc":  url.PathEscape,
		"queryEsc": url.QueryEscape,
		"age":      fmtAge,
		"off":      fmtOffset,
	}
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	for _, name := range pageNames {
		t := template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html"))
		c.pages[name] = t
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.clusterPage)
	mux.HandleFunc("GET /topics", c.topicsPage)
	mux.HandleFunc("GET /topics/{topic}", c.topicPage)
	mux.HandleFunc("GET /topics/{topic}/{partition}", c.partitionPage)
	mux.HandleFunc("GET /groups", c.groupsPage)
	mux.HandleFunc("GET /groups/{group}", c.groupPage)
	mux.HandleFunc("GET /reassignments", c.reassignmentsPage)
	mux.HandleFunc("GET /transactions", c.transactionsPage)
	c.mux = mux
	return c
}

// Register mounts the console's pages on mux (next to /metrics).
//
// guard, if given, wraps the console's handler (the node puts its
// authentication there).
func (c *Console) Register(mux *http.ServeMux, guard ...func(http.Handler) http.Handler) {
	var h http.Handler = c.mux
	for _, g := range guard {
		h = g(h)
	}
	for _, p := range []string{"GET /{$}", "GET /topics", "GET /topics/", "GET /groups", "GET /groups/", "GET /reassignments", "GET /transactions"} {
		mux.Handle(p, h)
	}
}

// ServeHTTP serves the console alone (tests, or a mux of its own).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

// page is what every template gets.
type page struct {
	Title   string
	Nav     string
	NodeID  int32
	Refresh int
	Now     time.Time
	// Errors are what could not be gathered (a broker down, a timeout).
	Errors []string
	Data   any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, title string, errors []string, data any) {
	refresh := DefaultRefresh
	if v := r.URL.Query().Get("refresh"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			refresh = clampRefresh(n)
		}
	}
	p := page{Title: title, Nav: name, NodeID: c.cfg.NodeID, Refresh: refresh, Now: c.cfg.Now(), Errors: errors, Data: data}
	var buf bytes.Buffer
	if err := c.pages[name].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		c.cfg.Logger.Error("console: render", "page", name, "err", err)
		http.Error(w, "console: render failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (c *Console) notFound(w http.ResponseWriter, r *http.Request, what string) {
	c.render(w, r, http.StatusNotFound, "notfound", "not found", nil, what)
}

// voters is the quorum's current voters if known, else the configured ones.
func (c *Console) voters() []Voter {
	if c.cfg.CurrentVoters != nil {
		if vs := c.cfg.CurrentVoters(); len(vs) > 0 {
			return vs
		}
	}
	return c.cfg.Voters
}

func (c *Console) image() *metadata.Image {
	if c.cfg.Image != nil {
		if im := c.cfg.Image(); im != nil {
			return im
		}
	}
	return metadata.EmptyImage()
}

// clampRefresh keeps a page from asking to be reloaded more often than
// every MinRefresh seconds (or less often than every MaxRefresh); 0 stays
// off.
func clampRefresh(n int) int {
	if n == 0 {
		return 0
	}
	return min(max(n, MinRefresh), MaxRefresh)
}

func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// fmtAge writes a duration the way an operator reads it ("-" for none).
func fmtAge(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// fmtOffset writes an offset ("-" for an unknown one).
func fmtOffset(o int64) string {
	if o < 0 {
		return "-"
	}
	return strconv.FormatInt(o, 10)
}

func errf(format string, a ...any) string { return fmt.Sprintf(format, a...) }
