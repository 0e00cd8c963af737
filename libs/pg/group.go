package pg

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
)

// Group commits concurrent calls of one write together: calls that arrive
// while the group's earlier transactions run wait, and the next
// transaction runs all of them (up to Max) as one. On a busy host a write
// path of a few short statements spends most of its database time on what
// every transaction pays whatever it writes (the round trips' wake-ups,
// BEGIN, COMMIT and its WAL flush, executor start-up); a group pays it once
// for all its calls. Nothing waits for company: a call that finds no
// transaction of the group running runs at once, alone if it is alone, so
// a quiet service answers as fast as without a group.
//
// While transactions run, a further one (up to Concurrent) starts only
// once as many calls wait as each running one took: two transactions
// overlap (one in the database while the other's answers are written),
// yet neither starts with the first few calls that arrive. Starting at
// once halved the groups of a saturated route, and a transaction costs
// about as much as four refunds in it whatever its size (bench-sale:
// docs/benchmarks.md, "Tracing off, and what a group's size costs").
//
// A group's transaction is all or nothing. When it fails as a whole (a
// deadlock with another transaction, a statement error, a lost
// connection), each of its calls runs again alone, so one call's failure
// is its own error and never another's: Exec must give each call the
// result it would have had alone.
type Group[I, O any] struct {
	exec       func(ctx context.Context, in []I) ([]GroupResult[O], error)
	max        int
	concurrent int
	key        func(I) string
	observe    func(calls int, err error)

	mu    sync.Mutex
	queue []*groupCall[I, O]
	// running transactions, and the calls they took.
	running, runningCalls int
}

// GroupResult is one call's result in its group.
type GroupResult[O any] struct {
	Out O
	Err error
}

// GroupOptions configures a Group.
type GroupOptions[I any] struct {
	// Max is the most calls one transaction takes (0: 32).
	Max int
	// Concurrent is how many transactions of the group run at once (0:
	// 2). One would make the write path wait on a single connection, and
	// leave the host idle while it waits; more than the host's cores buys
	// little but smaller groups.
	Concurrent int
	// Key, when set, keeps calls with the same key out of one
	// transaction: a later one waits for the next. For writes that read
	// what an earlier call of the same key writes (a customer's history).
	Key func(I) string
	// Observe, when set, is told each transaction's number of calls and
	// its error (nil: committed) after it ran (metrics).
	Observe func(calls int, err error)
}

type groupCall[I, O any] struct {
	in   I
	res  GroupResult[O]
	done chan struct{}
	// turn tells the call at the head of the queue that a transaction
	// may start (buffered, one value; it checks again under the lock).
	turn chan struct{}
	// taken: a transaction took the call (under the group's lock).
	taken bool
}

// NewGroup returns a group running exec: it gets the calls of one
// transaction and answers one result per call, in their order; its error
// fails the whole transaction (each call then runs alone). exec must not
// keep in.
func NewGroup[I, O any](exec func(ctx context.Context, in []I) ([]GroupResult[O], error), opt GroupOptions[I]) *Group[I, O] {
	if opt.Max <= 0 {
		opt.Max = 32
	}
	if opt.Concurrent <= 0 {
		opt.Concurrent = 2
	}
	if opt.Observe == nil {
		opt.Observe = func(int, error) {}
	}
	return &Group[I, O]{exec: exec, max: opt.Max, concurrent: opt.Concurrent, key: opt.Key, observe: opt.Observe}
}

// Do runs in, in a transaction with the calls around it, and answers its
// result. The transaction runs under ctx without its cancellation (other
// callers' writes are in it). When ctx ends first, Do answers its error
// at once: a call still waiting never runs, one already in a transaction
// may commit, as a write whose caller left during its own transaction
// may.
//
// The call at the head of the queue starts the next transaction, with the
// calls behind it, when the group lets one start; the others wait for
// their answer. So only a caller still waiting runs others' calls, and
// each change (a call queued or gone, a transaction ended) wakes one
// goroutine at most.
func (g *Group[I, O]) Do(ctx context.Context, in I) (O, error) {
	c := &groupCall[I, O]{in: in, done: make(chan struct{}), turn: make(chan struct{}, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	g.nudge()
	g.mu.Unlock()
	for {
		select {
		case <-c.done:
			return c.res.Out, c.res.Err
		case <-ctx.Done():
			return g.leave(c, ctx.Err())
		case <-c.turn:
		}
		g.mu.Lock()
		if c.taken || len(g.queue) == 0 || g.queue[0] != c || !g.mayStart() {
			g.mu.Unlock()
			continue
		}
		batch := g.take()
		g.running++
		g.runningCalls += len(batch)
		g.nudge() // calls a key kept back, or more than Max
		g.mu.Unlock()

		g.run(context.WithoutCancel(ctx), batch)

		g.mu.Lock()
		g.running--
		g.runningCalls -= len(batch)
		g.nudge()
		g.mu.Unlock()
	}
}

// mayStart reports whether a transaction may start now (g.mu held): none
// runs, or fewer than Concurrent do and as many calls wait as each took.
func (g *Group[I, O]) mayStart() bool {
	if g.running == 0 {
		return true
	}
	return g.running < g.concurrent && len(g.queue)*g.running >= g.runningCalls
}

// nudge tells the head of the queue to start a transaction when one may
// start (g.mu held).
func (g *Group[I, O]) nudge() {
	if len(g.queue) == 0 || !g.mayStart() {
		return
	}
	select {
	case g.queue[0].turn <- struct{}{}:
	default: // told already
	}
}

// leave answers a caller whose context ended before its call's result:
// a call still waiting is taken out of the queue and never runs; one a
// transaction took may still commit, as a write whose caller left during
// its own transaction may.
func (g *Group[I, O]) leave(c *groupCall[I, O], err error) (O, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.queue, c); i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
		g.nudge() // a new head
	}
	var zero O
	return zero, err
}

// take removes up to max waiting calls from the queue, no two with one
// key, and marks them taken; the others keep their place (g.mu held).
func (g *Group[I, O]) take() []*groupCall[I, O] {
	n := min(len(g.queue), g.max)
	var batch []*groupCall[I, O]
	if g.key == nil {
		batch = append([]*groupCall[I, O](nil), g.queue[:n]...)
		g.queue = append(g.queue[:0], g.queue[n:]...)
	} else {
		keys := make(map[string]struct{}, n)
		rest := g.queue[:0]
		for _, c := range g.queue {
			k := g.key(c.in)
			if _, dup := keys[k]; dup || len(batch) == g.max {
				rest = append(rest, c)
				continue
			}
			keys[k] = struct{}{}
			batch = append(batch, c)
		}
		clear(g.queue[len(rest):])
		g.queue = rest
	}
	for _, c := range batch {
		c.taken = true
	}
	return batch
}

// run executes batch as one transaction and answers its calls; when the
// transaction fails as a whole, each call runs alone.
func (g *Group[I, O]) run(ctx context.Context, batch []*groupCall[I, O]) {
	ins := make([]I, len(batch))
	for i, c := range batch {
		ins[i] = c.in
	}
	res, err := g.execute(ctx, ins)
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("group commit: %d results for %d calls", len(res), len(batch))
	}
	g.observe(len(batch), err)
	if err == nil {
		for i, c := range batch {
			c.res = res[i]
			close(c.done)
		}
		return
	}
	if len(batch) == 1 {
		batch[0].res = GroupResult[O]{Err: err}
		close(batch[0].done)
		return
	}
	for _, c := range batch {
		res, err := g.execute(ctx, []I{c.in})
		g.observe(1, err)
		switch {
		case err != nil:
			c.res = GroupResult[O]{Err: err}
		case len(res) != 1:
			c.res = GroupResult[O]{Err: errors.New("group commit: no result for the call")}
		default:
			c.res = res[0]
		}
		close(c.done)
	}
}

// execute runs exec; a panic is its error. Other callers wait on the
// transaction, so a panic must not leave them waiting for ever: it fails
// the group, and then only the call whose run alone panics.
func (g *Group[I, O]) execute(ctx context.Context, in []I) (res []GroupResult[O], err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("group commit: panic: %v\n%s", r, debug.Stack())
		}
	}()
	return g.exec(ctx, in)
}
