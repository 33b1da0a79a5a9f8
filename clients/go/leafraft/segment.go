package leafraft

// Segment: one tag's IDs served from a local double buffer, as Leaf's server does it, in the
// application's own process.
//
// Taking an ID is one atomic add on the current range. When 10 % of it is used, one goroutine
// fetches the next range (GET /v1/segment/{tag}/ranges?count=N); when the current one is used up,
// takers switch to it. A taker that finds both used up waits for the fetch, at most the client's
// timeout (or its context's deadline), and then gets the fetch's error or a TimeoutError.
//
// Invariants: every ID handed out lies in a range the server answered to this handle, and each
// is handed out once (the atomic add gives every position to one caller); ranges are used in
// the order they came, each once, whichever node answered them; after Close the unused IDs are
// dropped, never handed to anyone.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafraft/leafraft/clients/go/internal/plant"
)

// IDRange is a half-open range [Start, End) of IDs.
type IDRange struct {
	Start int64
	End   int64
}

// Len is the number of IDs in the range.
func (r IDRange) Len() int64 { return r.End - r.Start }

// span is one installed range: next is the position the next taker gets.
type span struct {
	next   atomic.Int64
	end    int64
	loadAt int64
	from   IDRange
}

func newSpan(r IDRange) *span {
	s := &span{end: r.End, loadAt: r.Start + r.Len()/10, from: r}
	s.next.Store(r.Start)
	return s
}

// closedSpan is installed by Close: every take from it is used up.
var closedSpan = newSpan(IDRange{})

// Segment is a handle on one tag's IDs, safe for concurrent use. Every Client.Segment call for
// the same tag answers the same handle.
type Segment struct {
	cur    atomic.Pointer[span]
	client *Client
	tag    string
	// listed is set once the tag's /ranges answered MODE_MISMATCH (a scrambled tag): its IDs
	// come from Leaf's list path since.
	listed atomic.Bool

	mu        sync.Mutex
	next      *span     // the range to switch to, once in
	queued    []IDRange // ranges of an answer beyond the first
	loading   bool
	loaded    chan struct{} // closed when the running load ends
	loadsDone uint64
	lastErr   error
	lastErrAt uint64 // loadsDone when lastErr was set
	closed    bool
	lastCount int64
	lastFetch time.Time
	lastNode  string
	lastRange IDRange
	fetches   atomic.Int64
}

func newSegment(c *Client, tag string) *Segment {
	s := &Segment{client: c, tag: tag, loaded: make(chan struct{})}
	s.cur.Store(newSpan(IDRange{}))
	return s
}

// Tag is the handle's tag.
func (s *Segment) Tag() string { return s.tag }

// NextID answers one ID: without waiting while the buffer holds IDs (no lock, no I/O), else
// waiting for the next range at most the client's timeout or ctx's deadline.
func (s *Segment) NextID(ctx context.Context) (int64, error) {
	sp := s.cur.Load()
	id := sp.next.Add(1) - 1
	if id < sp.end {
		if id == sp.loadAt {
			s.startLoad()
		}
		return id, nil
	}
	return s.slow(ctx)
}

// TryNextID answers an ID if the buffer holds one now; it never waits (a refill may start).
func (s *Segment) TryNextID() (int64, bool) {
	sp := s.cur.Load()
	id := sp.next.Add(1) - 1
	if id < sp.end {
		if id == sp.loadAt {
			s.startLoad()
		}
		return id, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.switchLocked() {
		sp = s.cur.Load()
		if id = sp.next.Add(1) - 1; id < sp.end {
			return id, true
		}
	}
	s.startLoadLocked()
	return 0, false
}

// NextIDs answers count IDs, in the order handed out.
func (s *Segment) NextIDs(ctx context.Context, count int) ([]int64, error) {
	ids := make([]int64, 0, count)
	for len(ids) < count {
		id, err := s.NextID(ctx)
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Preload starts fetching the first range now, so that the first NextID does not wait.
func (s *Segment) Preload() { s.startLoad() }

// Close stops handing out IDs: the IDs left in the buffer are dropped (a gap, never served).
func (s *Segment) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.cur.Store(closedSpan)
	s.next = nil
	s.queued = nil
	close(s.loaded)
	s.loaded = make(chan struct{})
}

// Fetches counts the range requests this handle made.
func (s *Segment) Fetches() int64 { return s.fetches.Load() }

// Available counts the IDs left in the current range (for benchmarks and tests).
func (s *Segment) Available() int64 {
	sp := s.cur.Load()
	if left := sp.end - sp.next.Load(); left > 0 {
		return left
	}
	return 0
}

// switchLocked installs the next range as the current one when it is in.
func (s *Segment) switchLocked() bool {
	if s.closed || s.next == nil {
		return false
	}
	s.cur.Store(s.next)
	s.next = nil
	if len(s.queued) > 0 {
		s.next = newSpan(s.queued[0])
		s.queued = s.queued[1:]
	}
	return true
}

func (s *Segment) slow(ctx context.Context) (int64, error) {
	deadline := time.Now().Add(s.client.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	started := time.Now()
	s.mu.Lock()
	arrived := s.loadsDone
	for {
		if s.closed {
			s.mu.Unlock()
			return 0, ErrClosed
		}
		sp := s.cur.Load()
		if id := sp.next.Add(1) - 1; id < sp.end {
			s.mu.Unlock()
			if id == sp.loadAt {
				s.startLoad()
			}
			return id, nil
		}
		if s.switchLocked() {
			continue
		}
		// Nothing ready: the load that ends after this taker arrived decides.
		if s.lastErr != nil && s.lastErrAt > arrived && !s.loading {
			err := s.lastErr
			s.mu.Unlock()
			return 0, err
		}
		s.startLoadLocked()
		if s.next != nil {
			continue // a queued range was installed
		}
		wait := s.loaded
		s.mu.Unlock()
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return 0, s.timeout(ctx, started)
		}
		timer := time.NewTimer(remaining)
		select {
		case <-wait:
			timer.Stop()
		case <-timer.C:
			return 0, s.timeout(ctx, started)
		case <-ctx.Done():
			timer.Stop()
			if ctx.Err() == context.Canceled {
				return 0, ctx.Err()
			}
			return 0, s.timeout(ctx, started)
		}
		s.mu.Lock()
	}
}

func (s *Segment) timeout(ctx context.Context, started time.Time) error {
	s.mu.Lock()
	last := "the next range did not come"
	if s.lastErr != nil {
		last = s.lastErr.Error()
	}
	s.mu.Unlock()
	return &TimeoutError{Waited: time.Since(started), Last: last, cause: deadlineCause(ctx)}
}

func (s *Segment) startLoad() {
	s.mu.Lock()
	s.startLoadLocked()
	s.mu.Unlock()
}

// startLoadLocked starts a load unless one runs, a range waits, or the handle is closed.
func (s *Segment) startLoadLocked() {
	if s.loading || s.next != nil || s.closed {
		return
	}
	if len(s.queued) > 0 {
		s.next = newSpan(s.queued[0])
		s.queued = s.queued[1:]
		return
	}
	s.loading = true
	go s.load()
}

// nextCountLocked is Leaf's dynamic step: a range that lasted under the configured duration
// doubles the next, one that lasted over twice it halves it, within [RangeMin, RangeMax].
func (s *Segment) nextCountLocked() int64 {
	cfg := s.client.cfg
	if s.lastFetch.IsZero() {
		return cfg.RangeMin
	}
	step := s.lastCount
	if step < cfg.RangeMin {
		step = cfg.RangeMin
	}
	lasted := time.Since(s.lastFetch)
	switch {
	case lasted < cfg.RangeLasting:
		if step*2 <= cfg.RangeMax {
			step *= 2
		}
	case lasted >= 2*cfg.RangeLasting:
		step /= 2
	}
	if step < cfg.RangeMin {
		step = cfg.RangeMin
	}
	if step > cfg.RangeMax {
		step = cfg.RangeMax
	}
	return step
}

func (s *Segment) load() {
	s.mu.Lock()
	count := s.nextCountLocked()
	s.mu.Unlock()
	s.fetches.Add(1)
	ranges, node, err := s.client.fetchSegmentRanges(context.Background(), s.tag, count, &s.listed)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loading = false
	s.loadsDone++
	if err == nil && len(ranges) == 0 {
		err = &TransportError{Message: "an empty range answer"}
	}
	if err != nil {
		s.lastErr, s.lastErrAt = err, s.loadsDone
	} else if !s.closed {
		s.lastErr = nil
		s.lastCount, s.lastFetch = count, time.Now()
		if plant.ReuseRangeAfterFailover.Load() && s.lastNode != "" && node != s.lastNode && s.lastRange.Len() > 0 {
			// The planted bug (conformance suite only): serve the previous range once more.
			ranges = append([]IDRange{s.lastRange}, ranges...)
		}
		s.lastNode, s.lastRange = node, ranges[len(ranges)-1]
		s.next = newSpan(ranges[0])
		s.queued = append(s.queued, ranges[1:]...)
	}
	close(s.loaded)
	s.loaded = make(chan struct{})
}
