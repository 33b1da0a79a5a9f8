package leafraft

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafraft/leafraft/clients/go/internal/plant"
)

// fakeNode answers /ranges from a counter shared by the fake cluster, as leafraft does.
type fakeNode struct {
	srv      *httptest.Server
	clusterV atomic.Value
	next     *atomic.Int64
	counts   []int64
	mu       sync.Mutex
	ranges   atomic.Int64
	posts    atomic.Int64
	auth     atomic.Value
	refuse   atomic.Value // an error code to answer every ID request with, or ""
	hang     atomic.Bool
	unpinned atomic.Bool // answer without the cluster header
}

func newFake(t *testing.T, cluster string, next *atomic.Int64, tls bool) *fakeNode {
	f := &fakeNode{next: next}
	f.clusterV.Store(cluster)
	f.refuse.Store("")
	f.auth.Store("")
	handler := http.HandlerFunc(f.serve)
	if tls {
		f.srv = httptest.NewTLSServer(handler)
	} else {
		f.srv = httptest.NewServer(handler)
	}
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeNode) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func writeError(w http.ResponseWriter, status int, code string) {
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"code":%q,"message":"fake %s"}}`, code, code)
}

func (f *fakeNode) serve(w http.ResponseWriter, r *http.Request) {
	cluster := f.clusterV.Load().(string)
	f.auth.Store(r.Header.Get("Authorization"))
	if f.hang.Load() {
		time.Sleep(3 * time.Second)
	}
	if pinned := r.Header.Get(ClusterIDHeader); pinned != "" && pinned != cluster {
		w.Header().Set(ClusterIDHeader, cluster)
		writeError(w, 409, "CLUSTER_MISMATCH")
		return
	}
	if !f.unpinned.Load() {
		w.Header().Set(ClusterIDHeader, cluster)
	}
	switch {
	case r.URL.Path == "/v1/cluster":
		fmt.Fprint(w, `{"node_id":1,"role":"leader","nodes":{}}`)
	case strings.HasPrefix(r.URL.Path, "/v1/segment/") && strings.HasSuffix(r.URL.Path, "/ranges"):
		f.ranges.Add(1)
		if code := f.refuse.Load().(string); code != "" {
			status := 503
			if code == "TAG_NOT_FOUND" {
				status = 404
			}
			writeError(w, status, code)
			return
		}
		count, _ := strconv.ParseInt(r.URL.Query().Get("count"), 10, 64)
		f.mu.Lock()
		f.counts = append(f.counts, count)
		f.mu.Unlock()
		start := f.next.Add(count) - count
		fmt.Fprintf(w, `{"tag":"t","ranges":[{"start":"%d","end":"%d"}]}`, start, start+count)
	case r.URL.Path == "/v1/tags" && r.Method == "POST":
		f.posts.Add(1)
		w.WriteHeader(201)
		fmt.Fprint(w, `{"tag":"t","max_id":"1","step":1000}`)
	default:
		writeError(w, 404, "NOT_FOUND")
	}
}

func newCounter() *atomic.Int64 {
	c := &atomic.Int64{}
	c.Store(1)
	return c
}

func mustClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	cfg.NoDiscovery = true
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

func TestIDsComeFromTheLocalRangeAndTheNextIsFetchedAt10Percent(t *testing.T) {
	node := newFake(t, "000000000000000a", newCounter(), false)
	c := mustClient(t, Config{Nodes: []string{node.addr()}, RangeMin: 100, RangeMax: 100})
	ctx := context.Background()
	seg := c.Segment("t")
	first, err := seg.NextID(ctx)
	if err != nil || first != 1 {
		t.Fatalf("first ID %d, %v", first, err)
	}
	for i := 0; i < 10; i++ {
		if _, err := seg.NextID(ctx); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the next range fetched in the background", func() bool { return node.ranges.Load() == 2 })
	ids, err := seg.NextIDs(ctx, 189)
	if err != nil {
		t.Fatal(err)
	}
	if ids[len(ids)-1] != 200 {
		t.Fatalf("IDs did not run on through the next range: last %d", ids[len(ids)-1])
	}
	if c.Segment("t") != seg {
		t.Fatal("one handle per tag")
	}
}

func TestTheRangeSizeFollowsLeafsDynamicStep(t *testing.T) {
	node := newFake(t, "000000000000000a", newCounter(), false)
	c := mustClient(t, Config{Nodes: []string{node.addr()}, RangeMin: 100, RangeMax: 400, RangeLasting: time.Hour})
	if _, err := c.Segment("t").NextIDs(context.Background(), 100+200+400+10); err != nil {
		t.Fatal(err)
	}
	node.mu.Lock()
	defer node.mu.Unlock()
	if fmt.Sprint(node.counts[:4]) != "[100 200 400 400]" {
		t.Fatalf("range sizes %v", node.counts)
	}
}

func TestAFailedNodeIsSkippedAndNoRangeIsServedTwice(t *testing.T) {
	counter := newCounter()
	a := newFake(t, "000000000000000a", counter, false)
	b := newFake(t, "000000000000000a", counter, false)
	c := mustClient(t, Config{Nodes: []string{a.addr(), b.addr()}, RangeMin: 50, RangeMax: 50})
	seen := map[int64]bool{}
	take := func(n int) {
		for i := 0; i < n; i++ {
			id, err := c.NextID(context.Background(), "t")
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("ID %d handed out twice", id)
			}
			seen[id] = true
		}
	}
	take(60)
	a.refuse.Store("NOT_READY")
	take(200)
	a.srv.Close()
	take(200)
	if b.ranges.Load() == 0 {
		t.Fatal("never failed over to b")
	}
}

func TestThePlantedBugServesARangeTwiceAfterAFailover(t *testing.T) {
	plant.ReuseRangeAfterFailover.Store(true)
	defer plant.ReuseRangeAfterFailover.Store(false)
	counter := newCounter()
	a := newFake(t, "000000000000000a", counter, false)
	b := newFake(t, "000000000000000a", counter, false)
	c := mustClient(t, Config{Nodes: []string{a.addr(), b.addr()}, RangeMin: 50, RangeMax: 50})
	seen := map[int64]bool{}
	dup := false
	for i := 0; i < 300; i++ {
		if i == 60 {
			a.srv.Close()
		}
		id, err := c.NextID(context.Background(), "t")
		if err != nil {
			t.Fatal(err)
		}
		dup = dup || seen[id]
		seen[id] = true
	}
	if !dup {
		t.Fatal("the planted switch did not reuse a range")
	}
}

func TestAWriteIsNotSentAgainAfterAnUnknownOutcome(t *testing.T) {
	a := newFake(t, "000000000000000a", newCounter(), false)
	b := newFake(t, "000000000000000a", newCounter(), false)
	a.hang.Store(true)
	c := mustClient(t, Config{Nodes: []string{a.addr(), b.addr()}, Timeout: 500 * time.Millisecond})
	_, err := c.CreateTagIfMissing(context.Background(), NewTag{Tag: "t"})
	if err == nil || b.posts.Load() != 0 {
		t.Fatalf("a write with an unknown outcome went to the next node: %v, %d", err, b.posts.Load())
	}
	// A refused connection sent nothing: the next node gets it.
	dead := a.addr()
	a.srv.Close()
	c2 := mustClient(t, Config{Nodes: []string{dead, b.addr()}})
	created, err := c2.CreateTagIfMissing(context.Background(), NewTag{Tag: "t", Step: 10})
	if err != nil || !created || b.posts.Load() != 1 {
		t.Fatalf("%v %v %d", created, err, b.posts.Load())
	}
}

func TestTheClusterIsPinnedOnFirstContact(t *testing.T) {
	counter := newCounter()
	a := newFake(t, "000000000000000a", counter, false)
	other := newFake(t, "000000000000000b", counter, false)
	c := mustClient(t, Config{Nodes: []string{a.addr(), other.addr()}, RangeMin: 10, RangeMax: 10})
	if _, err := c.NextID(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	if c.ClusterID() != 0xa {
		t.Fatalf("learnt %x", c.ClusterID())
	}
	// a's address now answers for another cluster (a wiped node that founded a new one).
	a.clusterV.Store("000000000000000c")
	started := time.Now()
	_, err := c.Segment("t").NextIDs(context.Background(), 20)
	if !IsCode(err, ClusterMismatch) || time.Since(started) > time.Second {
		t.Fatalf("served from another cluster, or not a typed refusal: %v", err)
	}
	// A node of another cluster that does not look at the pin is not served from either.
	other.unpinned.Store(true)
	wrong := mustClient(t, Config{Nodes: []string{other.addr()}, ClusterID: 0xa})
	if _, err := wrong.MonotonicID(context.Background(), "m"); !IsCode(err, ClusterMismatch) {
		t.Fatalf("%v", err)
	}
	// Only dead nodes and nodes of another cluster: a bounded wait, never an ID.
	a.srv.Close()
	short := mustClient(t, Config{Nodes: []string{a.addr(), other.addr()}, ClusterID: 0xa, Timeout: 300 * time.Millisecond})
	if _, err := short.NextID(context.Background(), "t"); err == nil {
		t.Fatal("served")
	}
}

func TestServerCodesAreTypedErrorsAndTimeoutsAreBounded(t *testing.T) {
	node := newFake(t, "000000000000000a", newCounter(), false)
	node.refuse.Store("TAG_NOT_FOUND")
	c := mustClient(t, Config{Nodes: []string{node.addr()}})
	_, err := c.NextID(context.Background(), "nope")
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Code != TagNotFound || apiErr.Status != 404 {
		t.Fatalf("%#v", err)
	}
	node.refuse.Store("")
	node.hang.Store(true)
	slow := mustClient(t, Config{Nodes: []string{node.addr()}, Timeout: 300 * time.Millisecond})
	started := time.Now()
	_, err = slow.MonotonicID(context.Background(), "m")
	if !errors.Is(err, ErrTimeout) || time.Since(started) > time.Second {
		t.Fatalf("%v after %v", err, time.Since(started))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = slow.NextID(ctx, "t2")
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	for _, code := range KnownCodes {
		if code.Transient() != map[ErrorCode]bool{NotReady: true, SegmentsNotReady: true, ClockBackwards: true,
			WorkerUnavailable: true, NoLeader: true, SecondExhausted: true, ClockAhead: true,
			ClockUnchecked: true, MembersBehind: true}[code] {
			t.Fatalf("%s", code)
		}
	}
}

func TestCloseDropsTheUnusedIDs(t *testing.T) {
	node := newFake(t, "000000000000000a", newCounter(), false)
	c := mustClient(t, Config{Nodes: []string{node.addr()}})
	if _, err := c.NextID(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := c.NextID(context.Background(), "t"); !errors.Is(err, ErrClosed) {
		t.Fatalf("%v", err)
	}
}

func TestMonotonicIDsAreNeverCached(t *testing.T) {
	node := newFake(t, "000000000000000a", newCounter(), false)
	c := mustClient(t, Config{Nodes: []string{node.addr()}, Token: "s3cret"})
	for i := 0; i < 3; i++ {
		if _, err := c.MonotonicID(context.Background(), "m"); err != nil {
			t.Fatal(err)
		}
	}
	if node.ranges.Load() != 3 || node.auth.Load() != "Bearer s3cret" {
		t.Fatalf("%d requests, auth %q", node.ranges.Load(), node.auth.Load())
	}
}

func TestTLSWithACustomCA(t *testing.T) {
	node := newFake(t, "000000000000000a", newCounter(), true)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: node.srv.Certificate().Raw})
	host := strings.TrimPrefix(node.srv.URL, "https://")
	c := mustClient(t, Config{Nodes: []string{host}, CAPEM: ca})
	if _, err := c.NextID(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
	untrusted := mustClient(t, Config{Nodes: []string{node.srv.URL}, Timeout: 300 * time.Millisecond})
	if _, err := untrusted.NextID(context.Background(), "t"); err == nil {
		t.Fatal("an untrusted certificate was accepted")
	}
}

func TestSnowflakeIDsComeApartLocally(t *testing.T) {
	id := (int64(1_700_000_000_000-1288834974657) << 22) | 7<<12 | 42
	parts := LeafLayout.Decode(id)
	if parts != (SnowflakeParts{TimestampMs: 1_700_000_000_000, Worker: 7, Sequence: 42}) {
		t.Fatalf("%+v", parts)
	}
}

func TestConcurrentTakersNeverShareAnID(t *testing.T) {
	node := newFake(t, "000000000000000a", newCounter(), false)
	c := mustClient(t, Config{Nodes: []string{node.addr()}, RangeMin: 100, RangeMax: 1000})
	var wg sync.WaitGroup
	results := make([][]int64, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			ids, err := c.Segment("t").NextIDs(context.Background(), 5000)
			if err != nil {
				t.Error(err)
			}
			results[g] = ids
		}(g)
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, ids := range results {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("ID %d twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != 40000 {
		t.Fatalf("%d IDs", len(seen))
	}
}

var _ = net.Dial
