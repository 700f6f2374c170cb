package txn

import (
	"context"

	"github.com/strand-io/strand/errs"
	"github.com/strand-io/strand/internal/auth"
	"github.com/strand-io/strand/internal/planted"
	pb "github.com/strand-io/strand/proto/strand/v1"
)

// The cap on open transactions per principal:
// transaction.max.open.per.principal. A transactional id belongs to the
// principal its last InitProducerId was answered to; a transaction is open
// from the AddPartitions that moves its id to Ongoing until its markers
// are written (Ongoing and Prepare*). An add that would open one more
// transaction than the cap for that principal is refused with
// THROTTLING_QUOTA_EXCEEDED (retriable, as Kafka's): the producer retries
// once one of its transactions ends. The principal is the one remembered
// for the id, never the caller's: under transaction version 2 a partition
// leader calls AddPartitions for the producer. The owner is kept in
// memory only: after the coordinator moves, an id is not counted until its
// producer's next InitProducerId (which a fenced or restarted producer
// sends anyway). Counting walks the ids this coordinator owns, only when
// a transaction opens and only with a cap set.

// remember records ctx's principal as the owner of id (no session, or a
// broker's: nobody, so never counted).
func (c *Coordinator) remember(ctx context.Context, id string) {
	p := ""
	if s, ok := auth.FromContext(ctx); ok && !s.Broker {
		p = s.Principal.String()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, err := c.ownerLocked(id); err == nil {
		if m := o.txns[id]; m != nil {
			m.Principal = p
		}
	}
}

// open reports whether m's transaction is open or about to be (a
// transition to Ongoing in flight).
func open(m *Metadata) bool {
	if m.pending != nil && m.pending.state == Ongoing {
		return true
	}
	switch m.State {
	case Ongoing, PrepareCommit, PrepareAbort, PrepareEpochFence:
		return true
	}
	return false
}

// openCapLocked refuses d when it opens a transaction of m's principal
// beyond the cap. c.mu is held.
func (c *Coordinator) openCapLocked(ctx context.Context, m *Metadata, d Decision) error {
	limit := c.cfg.MaxOpenPerPrincipal
	if limit <= 0 || m == nil || d.Write == nil || d.Write.state != Ongoing || open(m) {
		return nil
	}
	owner := m.Principal
	if planted.On(planted.OpenTxnCapCountsCaller) {
		owner = ""
		if s, ok := auth.FromContext(ctx); ok && !s.Broker {
			owner = s.Principal.String()
		}
	}
	if owner == "" {
		return nil
	}
	n := 0
	for _, o := range c.parts {
		for _, t := range o.txns {
			if t != m && t.Principal == owner && open(t) {
				n++
			}
		}
	}
	if n >= limit {
		return errs.New(pb.ErrorCode_THROTTLING_QUOTA_EXCEEDED,
			"%s has %d transactions open, transaction.max.open.per.principal=%d: retry once one ends", owner, n, limit)
	}
	return nil
}
