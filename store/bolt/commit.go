package bolt

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/bbolt"
)

// committer is group commit without a wait: a write runs at once when no
// commit is in flight; writes arriving while one is (its fsync) queue and
// commit together in the next transaction. bbolt's own Batch waits
// MaxBatchDelay before every commit, even alone, which put a floor of that
// delay under each of the several sequential writes of a turn.
//
// The first queued writer leads: it commits one batch (with its own write
// in it), then hands the lead to the next queued writer, so no caller
// keeps committing other callers' work. A function in a batch may run more
// than once: when one fails, the transaction is rolled back, that caller
// gets its error and the rest run again in a fresh transaction (as with
// bbolt's Batch).
type committer struct {
	db    *bbolt.DB
	delay time.Duration // a leader's wait for more writers (0: none)
	max   int

	mu    sync.Mutex
	queue []*commitOp
	busy  bool // a leader is committing
}

type commitOp struct {
	fn   func(*bbolt.Tx) error
	err  error
	done chan struct{} // closed with err set
	lead chan struct{} // closed when this op's caller is to lead the next batch
}

// errOpFailed stops a batch's transaction when one op failed.
var errOpFailed = errors.New("bolt: batched write failed")

// do runs fn in a read-write transaction shared with concurrent callers
// and returns once that transaction is durable (or failed).
func (c *committer) do(fn func(*bbolt.Tx) error) error {
	op := &commitOp{fn: fn, done: make(chan struct{}), lead: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, op)
	if c.busy {
		c.mu.Unlock()
		select {
		case <-op.done:
			return op.err
		case <-op.lead:
		}
	} else {
		c.busy = true
		c.mu.Unlock()
	}
	c.lead()
	<-op.done
	return op.err
}

// lead commits the queue's first batch, then passes the lead on.
func (c *committer) lead() {
	if c.delay > 0 {
		time.Sleep(c.delay)
	}
	c.mu.Lock()
	n := min(len(c.queue), c.max)
	batch := make([]*commitOp, n)
	copy(batch, c.queue)
	c.queue = append(c.queue[:0:0], c.queue[n:]...)
	c.mu.Unlock()
	c.run(batch)
	c.mu.Lock()
	if len(c.queue) > 0 {
		close(c.queue[0].lead)
	} else {
		c.busy = false
	}
	c.mu.Unlock()
}

func (c *committer) run(batch []*commitOp) {
	for len(batch) > 0 {
		failed := -1
		err := c.db.Update(func(tx *bbolt.Tx) error {
			for i, op := range batch {
				if err := call(op.fn, tx); err != nil {
					failed, op.err = i, err
					return errOpFailed
				}
			}
			return nil
		})
		if failed >= 0 {
			close(batch[failed].done)
			batch = append(batch[:failed:failed], batch[failed+1:]...)
			continue
		}
		for _, op := range batch {
			op.err = err
			close(op.done)
		}
		return
	}
}

// call runs fn, turning a panic into its caller's error (the committer
// runs other callers' functions).
func call(fn func(*bbolt.Tx) error, tx *bbolt.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bolt: write panicked: %v", r)
		}
	}()
	return fn(tx)
}
