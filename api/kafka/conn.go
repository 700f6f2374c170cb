package kafka

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strand-io/strand/internal/auth"
	pb "github.com/strand-io/strand/proto/strand/v1"
	"github.com/strand-io/strand/request"
)

// Conn is one client connection: what a handler may know of who asks.
type Conn struct {
	// H is the request layer, answering as the Kafka listener.
	H *request.Handler
	// ClientID is the client.id of the request being handled.
	ClientID string
	// Log is the server's logger with the connection's remote address.
	Log *slog.Logger

	srv *Server
	nc  net.Conn // the TLS connection over raw once the handshake is done
	raw net.Conn // the accepted connection (Server.Close closes it)
	// session is who the connection proved to be; every handler call's
	// context carries it (auth.NewContext). secure sets it after the TLS
	// handshake; SASL replaces it once the client authenticates.
	session auth.Session
	// out carries answers, in request order, to the writer.
	out chan pending
	// sasl is the connection's SASL state (sasl.go).
	sasl saslConn
	// throttled is the last request's quota throttle time (quota.go).
	throttled time.Duration
}

// pending is an answer on its way to the writer.
type pending struct {
	key      int16
	version  int16
	corr     int32
	flexible bool // the response header carries tagged fields
	resp     kmsg.Response
	start    time.Time
}

// deferred is an answer not complete when its handler returns: the writer
// calls wait (in request order) before encoding it. Produce with acks=all
// answers so.
type deferred struct {
	kmsg.Response
	wait func(ctx context.Context)
}

// protocolError closes the connection: reason is the metric label.
type protocolError struct {
	reason string
	msg    string
}

func (e *protocolError) Error() string { return e.msg }

func violation(reason, format string, args ...any) error {
	return &protocolError{reason: reason, msg: fmt.Sprintf(format, args...)}
}

func newConn(s *Server, nc net.Conn) *Conn {
	c := &Conn{H: s.h, Log: s.lg.With("remote", nc.RemoteAddr().String()), srv: s, nc: nc, raw: nc, out: make(chan pending, s.cfg.MaxInFlight)}
	c.initSASL()
	return c
}

// HandshakeTimeout bounds a connection's TLS handshake.
const HandshakeTimeout = 10 * time.Second

// secure runs the TLS handshake when the listener uses TLS (in the
// connection's goroutine, bounded by HandshakeTimeout and by the idle
// timeout when shorter) and sets the connection's session: the principal
// its verified client certificate maps to, else auth.Anonymous.
func (c *Conn) secure(ctx context.Context) error {
	var cs *tls.ConnectionState
	if cfg := c.srv.tls; cfg != nil {
		d := HandshakeTimeout
		if idle := c.srv.cfg.IdleTimeout; idle > 0 && idle < d {
			d = idle
		}
		tc := tls.Server(c.raw, cfg)
		hctx, cancel := context.WithTimeout(ctx, d)
		_ = c.raw.SetDeadline(time.Now().Add(d))
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			return err
		}
		_ = c.raw.SetDeadline(time.Time{})
		st := tc.ConnectionState()
		cs = &st
		c.nc = tc
	}
	s, err := c.srv.session(c.raw.RemoteAddr(), cs)
	if err != nil {
		return err
	}
	c.session = s
	if t := c.srv.cfg.TestSession; t != nil {
		c.session = *t // test-only (Config.TestSession)
	}
	if f := c.srv.cfg.TestingSession; f != nil { // test-only
		if t, ok := f(c.nc); ok {
			c.session = t
		}
	}
	return nil
}

// serve reads requests until the connection ends, handing answers to a
// writer goroutine it owns; it returns once both are done.
func (c *Conn) serve(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	if err := c.secure(ctx); err != nil {
		c.srv.metrics.closed.WithLabelValues("tls_handshake").Inc()
		c.Log.Debug("closing Kafka connection: TLS handshake or authentication failed", "err", err)
		c.raw.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.write(ctx, cancel)
	}()
	err := c.read(ctx)
	close(c.out)
	var pe *protocolError
	switch {
	case errors.As(err, &pe):
		c.srv.metrics.closed.WithLabelValues(pe.reason).Inc()
		c.Log.Warn("closing Kafka connection", "reason", pe.reason, "err", pe.msg, "clientId", c.ClientID)
		// Answers already decoded are still written before the close.
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil:
		c.Log.Debug("Kafka connection ended", "err", err)
	}
	<-done
	c.nc.Close()
}

// read decodes requests, calls their handlers and queues the answers.
func (c *Conn) read(ctx context.Context) error {
	r := bufio.NewReaderSize(c.nc, 64<<10)
	var size [4]byte
	for {
		if d := c.srv.cfg.IdleTimeout; d > 0 {
			_ = c.nc.SetReadDeadline(time.Now().Add(d))
		}
		if _, err := io.ReadFull(r, size[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return violation("idle", "no request for connections.max.idle.ms (%v)", c.srv.cfg.IdleTimeout)
			}
			return err
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 8 || n > c.srv.cfg.MaxRequestBytes {
			return violation("oversized", "request of %d bytes: it must be between 8 and socket.request.max.bytes (%d)", n, c.srv.cfg.MaxRequestBytes)
		}
		if max := c.saslMaxReceive(); max > 0 && n > max {
			// Before SASL authentication the frame is bounded by Kafka's
			// sasl.server.max.receive.size, not socket.request.max.bytes:
			// an unauthenticated client may not make the node allocate
			// 100 MiB per connection.
			return violation("oversized", "request of %d bytes before SASL authentication: at most sasl.server.max.receive.size (%d)", n, max)
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		_ = c.nc.SetReadDeadline(time.Time{})
		p, err := c.handle(ctx, buf)
		if err != nil {
			return err
		}
		if p != nil {
			if c.sasl.closeAfter != "" {
				c.delayFailedAuthentication(p) // sasl.go
			}
			select {
			case c.out <- *p:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := c.mute(ctx, c.throttled); err != nil { // quota.go
			return err
		}
		if c.sasl.closeAfter != "" {
			return violation("sasl_failed", "%s", c.sasl.closeAfter)
		}
	}
}

// header is a decoded request header (v1 or v2).
type header struct {
	key, version int16
	corr         int32
	clientID     string
}

// parseHeader decodes the header of frame and returns the body after it;
// flexible says whether the header carries tagged fields (header v2).
func parseHeader(frame []byte, flexible func(key, version int16) bool) (header, []byte, error) {
	var h header
	if len(frame) < 10 {
		return h, nil, violation("malformed", "request header of %d bytes is too short", len(frame))
	}
	h.key = int16(binary.BigEndian.Uint16(frame))
	h.version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.corr = int32(binary.BigEndian.Uint32(frame[4:]))
	idLen := int16(binary.BigEndian.Uint16(frame[8:]))
	rest := frame[10:]
	if idLen > 0 {
		if int(idLen) > len(rest) {
			return h, nil, violation("malformed", "client id of %d bytes overruns the request", idLen)
		}
		h.clientID, rest = string(rest[:idLen]), rest[idLen:]
	} else if idLen < -1 {
		return h, nil, violation("malformed", "client id length %d", idLen)
	}
	if flexible(h.key, h.version) {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return h, nil, err
		}
	}
	return h, rest, nil
}

// skipTags skips a tagged-field section (KIP-482).
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, violation("malformed", "request header tagged fields do not decode")
	}
	b = b[k:]
	for range n {
		if _, k = binary.Uvarint(b); k <= 0 {
			return nil, violation("malformed", "request header tag does not decode")
		}
		b = b[k:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, violation("malformed", "request header tag overruns the request")
		}
		b = b[k+int(size):]
	}
	return b, nil
}

// requestFlexible says whether a request at this version uses header v2
// (false for an API or version not served: those are refused on their
// key and version alone, whatever follows).
func requestFlexible(key, version int16) bool {
	if a, ok := apis[key]; !ok || version < a.min || version > a.max {
		return false
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		return false
	}
	req.SetVersion(version)
	return req.IsFlexible()
}

// errNewerApiVersions: an ApiVersions request at a version not served
// (decode's caller answers it at version 0, KIP-511).
var errNewerApiVersions = errors.New("ApiVersions at a newer version")

// decode decodes one frame: its header, the API it names and its
// request. What breaks the protocol is a *protocolError.
func decode(frame []byte) (header, api, kmsg.Request, error) {
	h, body, err := parseHeader(frame, requestFlexible)
	if err != nil {
		return h, api{}, nil, err
	}
	a, ok := apis[h.key]
	if !ok {
		return h, a, nil, violation("unknown_api", "API key %d (%s) is not served here; ApiVersions lists what is", h.key, kmsg.NameForKey(h.key))
	}
	if h.version < a.min || h.version > a.max {
		if h.key == int16(kmsg.ApiVersions) {
			return h, a, nil, errNewerApiVersions
		}
		if resp := unsupportedAnswer(h.key, h.version); resp != nil {
			return h, a, nil, &unsupported{resp: resp}
		}
		return h, a, nil, violation("unsupported_version", "%s version %d is not served (versions %d to %d are), and its answer at that version has no error code to say so", a.name, h.version, a.min, a.max)
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if err := req.ReadFrom(body); err != nil {
		return h, a, nil, violation("malformed", "%s v%d does not decode: %v", a.name, h.version, err)
	}
	return h, a, req, nil
}

// unsupported: a request at a version not served whose answer at that
// version carries a top-level error code: it is answered
// UNSUPPORTED_VERSION instead of closing the connection.
type unsupported struct{ resp kmsg.Response }

func (u *unsupported) Error() string { return "unsupported version" }

// unsupportedAnswer is the answer UNSUPPORTED_VERSION to key at version,
// or nil when the codec does not know that version or the answer has no
// top-level error code on the wire at it (Produce, Metadata and Fetch
// before v7, say: an empty answer would read as success). Whether the
// field is on the wire at that version is read off the encoding: it
// changes when the code does.
func unsupportedAnswer(key, version int16) kmsg.Response {
	req := kmsg.RequestForKey(key)
	if req == nil || version < 0 || version > req.MaxVersion() {
		return nil
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 {
		return nil
	}
	without := resp.AppendTo(nil)
	f.SetInt(int64(code(pb.ErrorCode_UNSUPPORTED_VERSION)))
	if bytes.Equal(without, resp.AppendTo(nil)) {
		return nil
	}
	return resp
}

// handle decodes one frame and answers it (nil: no answer).
func (c *Conn) handle(ctx context.Context, frame []byte) (*pending, error) {
	start := time.Now()
	c.throttled = 0
	h, a, req, err := decode(frame)
	c.ClientID = h.clientID
	if gerr := c.saslGate(h.key); gerr != nil {
		return nil, gerr
	}
	if errors.Is(err, errNewerApiVersions) {
		// KIP-511: a newer ApiVersions is answered at version 0 with the
		// versions served, so the client can pick one.
		return &pending{key: h.key, corr: h.corr, resp: apiVersionsUnsupported(), start: start}, nil
	}
	var us *unsupported
	if errors.As(err, &us) {
		c.Log.Debug("answered UNSUPPORTED_VERSION", "api", a.name, "version", h.version, "clientId", h.clientID)
		return &pending{key: h.key, version: h.version, corr: h.corr, flexible: us.resp.IsFlexible(), resp: us.resp, start: start}, nil
	}
	if err != nil {
		return nil, err
	}
	ctx = auth.WithClientID(auth.NewContext(ctx, c.withSession()), h.clientID)
	called := time.Now()
	resp, err := a.fn(ctx, c, req)
	if err != nil {
		return nil, err
	}
	c.throttled = c.throttle(ctx, req, resp, time.Since(called)) // quota.go
	if resp == nil {
		c.srv.metrics.requests.WithLabelValues(a.name).Inc()
		return nil, nil
	}
	resp.SetVersion(h.version)
	// ApiVersions answers with header v0 whatever its version (KIP-511).
	flex := resp.IsFlexible() && h.key != int16(kmsg.ApiVersions)
	return &pending{key: h.key, version: h.version, corr: h.corr, flexible: flex, resp: resp, start: start}, nil
}

// write sends answers in order until the reader is done; a failed write
// ends the connection.
func (c *Conn) write(ctx context.Context, cancel context.CancelFunc) {
	w := bufio.NewWriterSize(c.nc, 64<<10)
	var buf []byte
	failed := false
	for p := range c.out {
		if failed {
			continue // drain, so the reader never blocks on a dead writer
		}
		resp := p.resp
		if d, ok := resp.(*deferred); ok {
			d.wait(ctx)
			resp = d.Response
			resp.SetVersion(p.version)
		}
		buf = append(buf[:0], 0, 0, 0, 0)
		buf = binary.BigEndian.AppendUint32(buf, uint32(p.corr))
		if p.flexible {
			buf = append(buf, 0) // no tagged fields in the response header
		}
		buf = resp.AppendTo(buf)
		binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		_, err := w.Write(buf)
		if err == nil && len(c.out) == 0 {
			err = w.Flush()
		}
		if name := apiName(p.key); name != "" {
			c.srv.metrics.requests.WithLabelValues(name).Inc()
			c.srv.metrics.latency.WithLabelValues(name).Observe(time.Since(p.start).Seconds())
		}
		if err != nil {
			failed = true
			cancel()
			c.nc.Close() // unblocks the reader
		}
		if cap(buf) > 1<<20 {
			buf = nil // do not keep a large fetch answer's buffer
		}
	}
	if !failed {
		_ = w.Flush()
	}
}

func apiName(key int16) string {
	if a, ok := apis[key]; ok {
		return a.name
	}
	return kmsg.NameForKey(key)
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
