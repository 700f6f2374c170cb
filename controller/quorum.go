package controller

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"google.golang.org/protobuf/proto"

	"github.com/strand-io/strand/internal/tlsconf"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// Voter is one member of the controller quorum.
type Voter struct {
	ID   int32
	Addr string // Raft transport host:port
}

// ParseVoters reads "1@host:port,2@host:port,…" (--controller-voters).
func ParseVoters(s string) ([]Voter, error) {
	var out []Voter
	seen := map[int32]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		at := strings.IndexByte(part, '@')
		if at <= 0 {
			return nil, fmt.Errorf("controller voter %q: want id@host:port", part)
		}
		id, err := strconv.ParseInt(part[:at], 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("controller voter %q: bad node id", part)
		}
		if _, _, err := net.SplitHostPort(part[at+1:]); err != nil {
			return nil, fmt.Errorf("controller voter %q: %v", part, err)
		}
		if seen[int32(id)] {
			return nil, fmt.Errorf("controller voter id %d listed twice", id)
		}
		seen[int32(id)] = true
		out = append(out, Voter{ID: int32(id), Addr: part[at+1:]})
	}
	if len(out) == 0 {
		return nil, errors.New("no controller voters given")
	}
	return out, nil
}

// QuorumConfig configures the Raft group.
type QuorumConfig struct {
	NodeID int32
	// Dir holds raft.db (log and stable store) and snapshots.
	Dir string
	// Bind is the Raft listen address; Advertise what peers dial (default
	// Bind, or Listener's address).
	Bind, Advertise string
	// Listener, when set, is the Raft listener instead of listening on
	// Bind (tests, an in-memory network). Advertise then need not be a
	// TCP address: Raft only hands it to peers, who dial it with Dial.
	Listener net.Listener
	// Voters bootstraps a fresh cluster. A node with existing Raft state
	// never bootstraps again.
	Voters []Voter
	// Dial, when set, is used for outgoing Raft connections (the fault layer).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// ServerTLS and ClientTLS, when set (CONTROLLER:SSL), make the Raft
	// transport TLS both ways: accepted connections handshake with
	// ServerTLS (which requires a client certificate) and must pass
	// CheckPeer (the broker-principal check) or are closed; outgoing ones
	// (Raft's and the AddVoter catch-up query) handshake with ClientTLS.
	ServerTLS, ClientTLS *tls.Config
	CheckPeer            func(tls.ConnectionState) error
	// Timeouts; zero keeps hashicorp/raft's defaults.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout, CommitTimeout time.Duration
	SnapshotThreshold                                                    uint64
	Logger                                                               *slog.Logger
}

// Quorum is this node's Raft voter and its FSM.
type Quorum struct {
	cfg   QuorumConfig
	Raft  *raft.Raft
	FSM   *FSM
	store *raftboltdb.BoltStore
	trans *raft.NetworkTransport
}

// StartQuorum opens the Raft state in cfg.Dir and joins the group,
// bootstrapping it from cfg.Voters when this node has no state yet.
func StartQuorum(cfg QuorumConfig) (*Quorum, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	hl := hclog.New(&hclog.LoggerOptions{Name: fmt.Sprintf("raft-%d", cfg.NodeID), Level: hclog.Warn, Output: slogWriter{lg}, DisableTime: true})
	store, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db")})
	if err != nil {
		return nil, fmt.Errorf("open raft store: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hl)
	if err != nil {
		store.Close()
		return nil, err
	}
	ln, advAddr, err := raftListen(cfg)
	if err != nil {
		store.Close()
		return nil, err
	}
	dial := cfg.Dial
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	if cfg.ClientTLS != nil {
		dial = tlsDialer(dial, cfg.ClientTLS)
	}
	cfg.Dial = dial
	stream := newStreamLayer(ln, advAddr, dial)
	stream.tls, stream.checkPeer, stream.lg = cfg.ServerTLS, cfg.CheckPeer, lg
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: 3, Timeout: 10 * time.Second, Logger: hl,
	})
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(cfg.NodeID)))
	rc.Logger = hl
	if cfg.HeartbeatTimeout > 0 {
		rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	}
	if cfg.ElectionTimeout > 0 {
		rc.ElectionTimeout = cfg.ElectionTimeout
	}
	if cfg.LeaderLeaseTimeout > 0 {
		rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	}
	if cfg.CommitTimeout > 0 {
		rc.CommitTimeout = cfg.CommitTimeout
	}
	// Raft requires the leader's lease within the heartbeat timeout; a
	// shorter controller.quorum.fetch.timeout.ms shortens the lease too.
	if rc.LeaderLeaseTimeout > rc.HeartbeatTimeout {
		rc.LeaderLeaseTimeout = rc.HeartbeatTimeout
	}
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	has, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		trans.Close()
		store.Close()
		return nil, err
	}
	if has && len(cfg.Voters) > 0 {
		// The state is this cluster's if the voters are those it was first
		// started with (its configuration may have changed since: AddVoter,
		// RemoveVoter), else if they are its current configuration. A
		// first-start record that exists but is empty or unreadable says
		// nothing either way: warn and start rather than refuse a node that
		// is most likely this cluster's.
		first, known, ferr := firstStart(cfg.Dir)
		check := false
		switch {
		case known:
			check = first != votersString(cfg.Voters)
		case errors.Is(ferr, os.ErrNotExist):
			check = true
		default:
			lg.Warn("the record of the controller voters this Raft state was first started with is unreadable; not checking --controller-voters against it",
				"file", filepath.Join(cfg.Dir, firstStartFile), "err", ferr)
		}
		if check {
			if err := checkVoters(rc, store, snaps, trans, cfg.Voters); err != nil {
				trans.Close()
				store.Close()
				return nil, fmt.Errorf("%s: %w", cfg.Dir, err)
			}
		}
	}
	if !has {
		if err := recordFirstStart(cfg.Dir, cfg.Voters); err != nil {
			trans.Close()
			store.Close()
			return nil, err
		}
		var servers []raft.Server
		member := false
		for _, v := range cfg.Voters {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(v.ID))), Address: raft.ServerAddress(v.Addr)})
			member = member || v.ID == cfg.NodeID
		}
		if member {
			if err := raft.BootstrapCluster(rc, store, store, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
				trans.Close()
				store.Close()
				return nil, fmt.Errorf("bootstrap raft: %w", err)
			}
			lg.Info("bootstrapped controller quorum", "voters", len(servers))
		}
	}
	fsm := NewFSM()
	r, err := raft.NewRaft(rc, fsm, store, store, snaps, unpipelined{trans})
	if err != nil {
		trans.Close()
		store.Close()
		return nil, err
	}
	lastIndex := r.LastIndex
	stream.lastIndex.Store(&lastIndex)
	return &Quorum{cfg: cfg, Raft: r, FSM: fsm, store: store, trans: trans}, nil
}

// raftListen returns the Raft listener and the address peers dial: a
// TCP listener on cfg.Bind and cfg.Advertise resolved as TCP, or the
// given listener and cfg.Advertise as it is (default: its address).
func raftListen(cfg QuorumConfig) (net.Listener, net.Addr, error) {
	if ln := cfg.Listener; ln != nil {
		if cfg.Advertise == "" {
			return ln, ln.Addr(), nil
		}
		return ln, advertised{ln.Addr().Network(), cfg.Advertise}, nil
	}
	adv := cfg.Advertise
	if adv == "" {
		adv = cfg.Bind
	}
	ln, err := net.Listen("tcp", cfg.Bind)
	if err != nil {
		return nil, nil, fmt.Errorf("raft listen %s: %w", cfg.Bind, err)
	}
	advAddr, err := net.ResolveTCPAddr("tcp", adv)
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("raft advertise %s: %w", adv, err)
	}
	return ln, advAddr, nil
}

// advertised is an advertised address taken as given.
type advertised struct{ network, addr string }

func (a advertised) Network() string { return a.network }
func (a advertised) String() string  { return a.addr }

// Propose commits a batch through Raft and waits until it is applied here.
// The batch's offset is the Raft index.
func (q *Quorum) Propose(ctx context.Context, records ...*pb.MetadataRecord) (int64, error) {
	// The batch is stamped with the format the cluster writes now, so a
	// binary that reads less stops at it rather than misreading it.
	data, err := proto.Marshal(&pb.MetadataBatch{Records: records, FormatVersion: q.FSM.Image().FormatVersion()})
	if err != nil {
		return 0, err
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	f := q.Raft.Apply(data, timeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			return 0, errNotController
		}
		return 0, err
	}
	res, _ := f.Response().(ApplyResult)
	return res.Offset, res.Err
}

var errNotController = errors.New("not the active controller")

// IsLeader reports whether this node is the active controller.
func (q *Quorum) IsLeader() bool { return q.Raft.State() == raft.Leader }

// LeaderID is the active controller's node id, -1 if unknown.
func (q *Quorum) LeaderID() int32 {
	_, id := q.Raft.LeaderWithID()
	if id == "" {
		return -1
	}
	n, err := strconv.Atoi(string(id))
	if err != nil {
		return -1
	}
	return int32(n)
}

// Voters lists the voters of the current Raft configuration (a node that
// AddVoter is still catching up is a non-voter: Members lists it).
func (q *Quorum) Voters() []Voter {
	voters, _ := q.Members()
	return voters
}

// Stats is what DescribeQuorum reports.
func (q *Quorum) Stats() map[string]string { return q.Raft.Stats() }

// Close shuts Raft down and closes the store.
func (q *Quorum) Close() error {
	err := q.Raft.Shutdown().Error()
	q.trans.Close()
	if cerr := q.store.Close(); err == nil {
		err = cerr
	}
	return err
}

// streamLayer is Raft's TCP stream layer with a pluggable dialer. Its
// listener also answers one question of its own, asked by a leader that
// adds this node as a voter (members.go): how far is this node's Raft log?
// A connection's first byte tells which: hashicorp/raft's NetworkTransport
// starts every RPC with a type byte below 16; lastIndexQuery is not one of
// them. The connections raft's RPCs came on are handed to raft with that
// first byte put back.
type streamLayer struct {
	ln   net.Listener
	adv  net.Addr
	dial func(ctx context.Context, addr string) (net.Conn, error)
	// lastIndex reports this node's Raft log end (set once Raft exists;
	// before that the query is not answered).
	lastIndex atomic.Pointer[func() uint64]

	start   sync.Once
	conns   chan net.Conn
	closed  chan struct{}
	closeMu sync.Mutex
	isShut  bool
	// open holds every connection accepted or dialled and not yet closed:
	// Close closes them all. Raft's NetworkTransport closes neither the
	// connections it pools nor those it was handed, and its goroutines
	// reading them would wait for ever once the peers are gone as well.
	open map[net.Conn]struct{}

	// tls, when set, is the TLS every accepted connection handshakes with
	// before its first byte is read; checkPeer then admits the peer.
	tls       *tls.Config
	checkPeer func(tls.ConnectionState) error
	lg        *slog.Logger
}

// RaftHandshakeTimeout bounds the TLS handshake of a Raft connection.
const RaftHandshakeTimeout = 10 * time.Second

// tlsDialer wraps dial with a TLS handshake (the server name is the
// dialled host unless cfg names one).
func tlsDialer(dial func(ctx context.Context, addr string) (net.Conn, error), cfg *tls.Config) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		host := addr
		if h, _, err := net.SplitHostPort(addr); err == nil {
			host = h
		}
		tc := tlsconf.ForHost(cfg, host) // the name checked even for an IP
		conn := tls.Client(c, tc)
		hctx, cancel := context.WithTimeout(ctx, RaftHandshakeTimeout)
		defer cancel()
		if err := conn.HandshakeContext(hctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("raft TLS handshake with %s: %w", addr, err)
		}
		return conn, nil
	}
}

// lastIndexQuery is the first byte of a log-end query on the Raft
// listener; the answer is the log's last index, 8 bytes big-endian.
const lastIndexQuery byte = 0xE1

func newStreamLayer(ln net.Listener, adv net.Addr, dial func(ctx context.Context, addr string) (net.Conn, error)) *streamLayer {
	return &streamLayer{ln: ln, adv: adv, dial: dial, conns: make(chan net.Conn), closed: make(chan struct{}), open: map[net.Conn]struct{}{}}
}

func (s *streamLayer) Accept() (net.Conn, error) {
	s.start.Do(func() { go s.acceptLoop() })
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// acceptLoop accepts connections and reads each one's first byte on a
// goroutine of its own (a pooled raft connection may stay silent for long).
func (s *streamLayer) acceptLoop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-s.closed:
				return
			case <-time.After(10 * time.Millisecond):
				continue
			}
		}
		s.closeMu.Lock()
		if s.isShut {
			s.closeMu.Unlock()
			c.Close()
			return
		}
		s.open[c] = struct{}{}
		s.closeMu.Unlock()
		go s.sniff(c)
	}
}

func (s *streamLayer) sniff(raw net.Conn) {
	var b [1]byte
	c, err := s.secure(raw)
	if err == nil {
		_, err = io.ReadFull(c, b[:])
	}
	if err != nil {
		s.forget(raw)
		c.Close()
		return
	}
	if b[0] == lastIndexQuery {
		defer s.forget(raw)
		defer c.Close()
		f := s.lastIndex.Load()
		if f == nil {
			return
		}
		var out [8]byte
		binary.BigEndian.PutUint64(out[:], (*f)())
		c.SetWriteDeadline(time.Now().Add(3 * time.Second))
		c.Write(out[:])
		return
	}
	select {
	case s.conns <- &prefixConn{Conn: &trackedConn{Conn: c, s: s, raw: raw}, first: b[0]}:
	case <-s.closed:
		s.forget(raw)
		c.Close()
	}
}

// forget drops a connection from the open ones (it is closed, or about to
// be, by its user).
func (s *streamLayer) forget(c net.Conn) {
	s.closeMu.Lock()
	delete(s.open, c)
	s.closeMu.Unlock()
}

// trackedConn is a connection of the stream layer's open set that leaves
// it when closed.
type trackedConn struct {
	net.Conn
	s   *streamLayer
	raw net.Conn
}

func (c *trackedConn) Close() error {
	c.s.forget(c.raw)
	return c.Conn.Close()
}

// secure runs the TLS handshake of an accepted connection and the peer
// check, when the transport uses TLS (a refused peer is logged; the
// caller closes the connection).
func (s *streamLayer) secure(raw net.Conn) (net.Conn, error) {
	if s.tls == nil {
		return raw, nil
	}
	tc := tls.Server(raw, s.tls)
	_ = raw.SetDeadline(time.Now().Add(RaftHandshakeTimeout))
	err := tc.Handshake()
	if err == nil && s.checkPeer != nil {
		err = s.checkPeer(tc.ConnectionState())
	}
	_ = raw.SetDeadline(time.Time{})
	if err != nil {
		if s.lg != nil {
			s.lg.Warn("raft connection refused", "remote", raw.RemoteAddr().String(), "err", err)
		}
		return raw, err
	}
	return tc, nil
}

func (s *streamLayer) Close() error {
	s.closeMu.Lock()
	if !s.isShut {
		s.isShut = true
		close(s.closed)
		for c := range s.open {
			c.Close()
		}
		clear(s.open)
	}
	s.closeMu.Unlock()
	return s.ln.Close()
}

func (s *streamLayer) Addr() net.Addr { return s.adv }

// prefixConn gives back the first byte the stream layer read.
type prefixConn struct {
	net.Conn
	first byte
	done  bool
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if !c.done && len(p) > 0 {
		c.done = true
		p[0] = c.first
		return 1, nil
	}
	return c.Conn.Read(p)
}
func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := s.dial(ctx, string(addr))
	if err != nil {
		return nil, err
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.isShut {
		c.Close()
		return nil, net.ErrClosed
	}
	s.open[c] = struct{}{}
	return &trackedConn{Conn: c, s: s, raw: c}, nil
}

var _ io.Closer = (*Quorum)(nil)

// slogWriter forwards hashicorp/raft's log lines to the node's logger.
type slogWriter struct{ lg *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.lg.Warn(strings.TrimSpace(string(p)), "component", "raft")
	return len(p), nil
}

// checkVoters refuses to start on Raft state made for another voter set:
// the data directory belongs to a different cluster, and joining with it
// would split the quorum.
func checkVoters(rc *raft.Config, store *raftboltdb.BoltStore, snaps raft.SnapshotStore, trans raft.Transport, want []Voter) error {
	probe := *rc // GetConfiguration marks its config to skip startup
	conf, err := raft.GetConfiguration(&probe, NewFSM(), store, store, snaps, trans)
	if err != nil {
		return err
	}
	have := map[string]string{}
	for _, s := range conf.Servers {
		have[string(s.ID)] = string(s.Address)
	}
	same := len(have) == len(want)
	for _, v := range want {
		if have[strconv.Itoa(int(v.ID))] != v.Addr {
			same = false
		}
	}
	if !same {
		var h []string
		for id, a := range have {
			h = append(h, id+"@"+a)
		}
		return fmt.Errorf("this controller's Raft state is for the voters %v, not the --controller-voters given; point --data-dir at this cluster's directory or remove it", h)
	}
	return nil
}

// unpipelined is the Raft transport without pipelined replication: Raft
// then sends a follower one AppendEntries at a time. hashicorp/raft
// v1.7.3's pipeline can deadlock: once a follower answers an
// AppendEntries with a failure (it was paused, say, and its term or log
// moved), the pipeline's decoder stops reading answers, and the next send
// waits for room that never comes; the leader keeps heartbeating that
// follower but never sends it another entry, and cannot shut down. The
// simulation found it (a node paused for a few seconds, the cluster
// killed afterwards hung). The controller's log is small and low in rate,
// so pipelining buys it nothing.
type unpipelined struct{ *raft.NetworkTransport }

// AppendEntriesPipeline declines, so Raft replicates without a pipeline.
func (unpipelined) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}
