package console

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/strand-io/strand/metadata"
)

// The console is served on the metrics listener, which has no
// authentication: what one page request may cost the brokers is bounded
// here. At most maxGathers pages gather from the brokers at once; a
// request for a page being gathered waits for that gather's result
// rather than starting its own (one flight per page key); a request that
// finds every slot taken waits at most half its page's timeout, then
// gets 503 with Retry-After; a gathered dataset is served again, without
// asking any broker, for cacheTTL on the console's clock while the
// metadata image is the same.

const (
	// maxGathers is how many pages may gather from the brokers at once.
	maxGathers = 2
	// cacheTTL is how long a gathered dataset is served again.
	cacheTTL = time.Second
	// maxCached bounds the cache (page keys carry names from the URL).
	maxCached = 256
	// maxCachedKey: a longer key is gathered (under the same slots) but
	// neither shared nor cached.
	maxCachedKey = 1024
	// maxRows is the most rows a table on a page shows; the page says
	// "showing N of M" when it has more.
	maxRows = 500
	// maxOffsetFetches is how many OffsetFetch calls one page has in
	// flight at once.
	maxOffsetFetches = 8
	// MinRefresh and MaxRefresh bound ?refresh=N (0 still turns it off).
	MinRefresh = 2
	MaxRefresh = 300
)

var errBusy = errors.New("console: every gather slot is busy")

// flight is one gather: in flight until done is closed, then cached.
type flight struct {
	im       *metadata.Image
	done     chan struct{}
	at       time.Time
	data     any
	problems []string
	err      error
}

type gatherer struct {
	slots   chan struct{}
	mu      sync.Mutex
	flights map[string]*flight
	cache   map[string]*flight
}

func newGatherer() *gatherer {
	return &gatherer{slots: make(chan struct{}, maxGathers), flights: map[string]*flight{}, cache: map[string]*flight{}}
}

func (c *Console) fresh(f *flight, now time.Time) bool {
	age := now.Sub(f.at)
	return age >= 0 && age < cacheTTL
}

// gather returns the dataset of the page key for image im: a cached one,
// the result of the gather in flight for key, or what f gathers under a
// context bounded by the page's timeout. It fails with errBusy when no
// slot frees up within half the page's timeout, or with the request's
// error when its client went away.
func (c *Console) gather(r *http.Request, im *metadata.Image, key string, f func(ctx context.Context) (any, []string)) (any, []string, error) {
	g := c.g
	shared := len(key) <= maxCachedKey
	var fl *flight
	if shared {
		g.mu.Lock()
		if e := g.cache[key]; e != nil && e.im == im && c.fresh(e, c.cfg.Now()) {
			g.mu.Unlock()
			return e.data, e.problems, nil
		}
		if in := g.flights[key]; in != nil {
			g.mu.Unlock()
			select {
			case <-in.done:
				return in.data, in.problems, in.err
			case <-r.Context().Done():
				return nil, nil, r.Context().Err()
			}
		}
		fl = &flight{im: im, done: make(chan struct{})}
		g.flights[key] = fl
		g.mu.Unlock()
	} else {
		fl = &flight{im: im, done: make(chan struct{})}
	}
	finished := false
	defer func() {
		if fl.err == nil && !finished {
			fl.err = errBusy // f panicked: the waiters get a 503, not a hang
		}
		if shared {
			g.mu.Lock()
			delete(g.flights, key)
			if fl.err == nil {
				g.put(key, fl, c)
			}
			g.mu.Unlock()
		}
		close(fl.done)
	}()
	wait := time.NewTimer(c.cfg.Timeout / 2)
	select {
	case g.slots <- struct{}{}:
		wait.Stop()
	case <-wait.C:
		fl.err = errBusy
		return nil, nil, fl.err
	}
	defer func() { <-g.slots }()
	// Not the request's own context: others may be waiting for this
	// gather, and it is bounded by the timeout anyway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), c.cfg.Timeout)
	defer cancel()
	fl.data, fl.problems = f(ctx)
	fl.at = c.cfg.Now()
	finished = true
	return fl.data, fl.problems, nil
}

// put caches fl under key, dropping stale entries; g.mu is held.
func (g *gatherer) put(key string, fl *flight, c *Console) {
	now := c.cfg.Now()
	for k, e := range g.cache {
		if !c.fresh(e, now) {
			delete(g.cache, k)
		}
	}
	for k := range g.cache {
		if len(g.cache) < maxCached {
			break
		}
		delete(g.cache, k)
	}
	g.cache[key] = fl
}

// gatherFailed answers a request gather could not serve.
func (c *Console) gatherFailed(w http.ResponseWriter, err error) {
	if !errors.Is(err, errBusy) {
		return // the client went away
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(c.cfg.Timeout.Seconds()))))
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, "console: busy gathering other pages, retry later", http.StatusServiceUnavailable)
}

// shown is a table's "showing N of M" line.
type shown struct {
	Shown, Total int
}

func capped[T any](rows []T) ([]T, shown) {
	s := shown{Shown: min(len(rows), maxRows), Total: len(rows)}
	return rows[:s.Shown], s
}
