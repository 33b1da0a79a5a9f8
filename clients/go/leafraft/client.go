// Package leafraft is a Go client of leafraft, the distributed ID service: segment IDs served
// from local double-buffered ranges, snowflake and time-sequence IDs, monotonic tags, typed
// errors, node failover and cluster pinning. Standard library only.
//
//	client, err := leafraft.New(leafraft.Config{Nodes: []string{"10.0.0.1:8080", "10.0.0.2:8080"}})
//	if err != nil { ... }
//	defer client.Close()
//	orders := client.Segment("order")
//	id, err := orders.NextID(ctx) // from the local range: no request while it lasts
//
// What is guaranteed:
//   - No ID is handed out twice: every ID comes from a range the cluster committed to this
//     request alone, each range is used once, by one handle, in the order it came, whichever node
//     answered it (a failover never makes a range be served again), and the local buffer hands
//     each of its IDs to one caller.
//   - IDs are not in a global order: two processes (or one process after a failover) interleave
//     ranges. A monotonic tag (Client.MonotonicID) is never cached: each call is one request
//     answered by the leader, above every ID of the tag any client received before it.
//   - Gaps: Segment.Close and Client.Close drop the unused IDs of the current and next range;
//     they are never served again, by anyone.
//   - No unbounded wait: a call that cannot be served within Config.Timeout (or its context's
//     deadline) answers a *TimeoutError (errors.Is(err, leafraft.ErrTimeout)), or the server's
//     own error (*leafraft.Error with its Code) as soon as one is definite.
//   - Only what is safe to repeat is repeated on another node: ID requests and reads. A write is
//     sent to a second node only when the first refused the connection or is of another cluster.
//   - Pinning: the client learns the cluster ID (X-Leafraft-Cluster-Id) from the first node
//     that answers, or takes Config.ClusterID, and sends it with every request; a node of another
//     cluster is never served from, and when every node is of another cluster the answer is a
//     *leafraft.Error with Code ClusterMismatch.
package leafraft

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config is the client's settings. Only Nodes is required.
type Config struct {
	// Nodes to start from, "host:port" or "http(s)://host:port". With discovery (the default)
	// the members /v1/cluster names are added.
	Nodes []string
	// Token is sent as "Authorization: Bearer" (a --client-token, or the admin token or secret
	// for the admin calls).
	Token string
	// CAFile or CAPEM: PEM certificates of the CA that signs the nodes' certificates; only these
	// are trusted, and a bare host:port means https://.
	CAFile string
	CAPEM  []byte
	// Timeout bounds one call, failover and waiting for a range included [10 s].
	Timeout time.Duration
	// AttemptTimeout bounds one HTTP attempt on one node [the smaller of Timeout and 2 s].
	AttemptTimeout time.Duration
	// NoDiscovery: talk to exactly Nodes.
	NoDiscovery bool
	// ClusterID pins the cluster (as /v1/cluster shows it, in hex: use ParseClusterID); 0 learns
	// it from the first node that answers.
	ClusterID uint64
	// RangeMin and RangeMax bound the range a segment handle fetches at a time [1,000 and 10,000,
	// the server's most per request]; RangeLasting is how long a range should last: used up
	// faster, the next is twice as large, slower than twice this, half (Leaf's dynamic step) [60 s].
	RangeMin     int64
	RangeMax     int64
	RangeLasting time.Duration
}

// ParseClusterID reads a cluster ID as /v1/cluster and the header write it (hex).
func ParseClusterID(text string) (uint64, error) { return strconv.ParseUint(text, 16, 64) }

// MaxPerRequest is the server's most IDs per request.
const MaxPerRequest = 10_000

// Client is a client of one leafraft cluster, safe for concurrent use. Create one per process.
type Client struct {
	cfg      Config
	t        *transport
	mu       sync.Mutex
	segments map[string]*Segment
	closed   bool
}

// New checks the configuration and makes a client; it sends nothing yet.
func New(cfg Config) (*Client, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("leafraft: invalid configuration: negative timeout")
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 2 * time.Second
	}
	if cfg.AttemptTimeout > cfg.Timeout {
		cfg.AttemptTimeout = cfg.Timeout
	}
	if cfg.RangeMin <= 0 {
		cfg.RangeMin = 1000
	}
	if cfg.RangeMin > MaxPerRequest {
		cfg.RangeMin = MaxPerRequest
	}
	if cfg.RangeMax <= 0 {
		cfg.RangeMax = MaxPerRequest
	}
	if cfg.RangeMax < cfg.RangeMin {
		cfg.RangeMax = cfg.RangeMin
	}
	if cfg.RangeMax > MaxPerRequest {
		cfg.RangeMax = MaxPerRequest
	}
	if cfg.RangeLasting <= 0 {
		cfg.RangeLasting = 60 * time.Second
	}
	t, err := newTransport(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, t: t, segments: map[string]*Segment{}}, nil
}

// Segment answers the handle on tag's IDs; every call for the same tag answers the same one.
func (c *Client) Segment(tag string) *Segment {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.segments[tag]
	if !ok {
		s = newSegment(c, tag)
		if c.closed {
			s.Close()
		}
		c.segments[tag] = s
	}
	return s
}

// NextID answers one ID of tag from its local range: Client.Segment(tag).NextID(ctx).
func (c *Client) NextID(ctx context.Context, tag string) (int64, error) {
	return c.Segment(tag).NextID(ctx)
}

// Close closes every segment handle: their unused IDs are dropped (gaps, never served).
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	segments := c.segments
	c.mu.Unlock()
	for _, s := range segments {
		s.Close()
	}
	c.t.reads.CloseIdleConnections()
}

// ClusterID answers the cluster this client talks to (0 until a node answered).
func (c *Client) ClusterID() uint64 { return c.t.clusterID.Load() }

// Nodes answers the base URLs the client knows now.
func (c *Client) Nodes() []string { return append([]string(nil), c.t.nodeList()...) }

// HTTPRequests counts the HTTP attempts sent so far.
func (c *Client) HTTPRequests() int64 { return c.t.requests.Load() }

type wireRange struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

func parseID(text string) (int64, error) {
	id, err := strconv.ParseInt(text, 10, 64)
	if err != nil || id < 0 {
		return 0, &TransportError{Message: fmt.Sprintf("not a decimal ID: %q", text)}
	}
	return id, nil
}

func parseIDs(texts []string) ([]int64, error) {
	ids := make([]int64, len(texts))
	for i, text := range texts {
		id, err := parseID(text)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

func parseRanges(path string, wire []wireRange, count int64) ([]IDRange, error) {
	out := make([]IDRange, 0, len(wire))
	var total int64
	for _, w := range wire {
		start, err := parseID(w.Start)
		if err != nil {
			return nil, err
		}
		end, err := parseID(w.End)
		if err != nil {
			return nil, err
		}
		if end <= start {
			return nil, &TransportError{Message: fmt.Sprintf("%s: an empty or reversed range", path)}
		}
		total += end - start
		out = append(out, IDRange{Start: start, End: end})
	}
	if total > count {
		return nil, &TransportError{Message: fmt.Sprintf("%s: %d IDs answered for %d asked", path, total, count)}
	}
	return out, nil
}

// fetchRanges asks for count IDs of tag as ranges; safe to repeat (a range lost is a gap).
func (c *Client) fetchRanges(ctx context.Context, tag string, count int64) ([]IDRange, string, error) {
	path := fmt.Sprintf("/v1/segment/%s/ranges?count=%d", url.PathEscape(tag), count)
	var answer struct {
		Ranges []wireRange `json:"ranges"`
	}
	node, err := c.t.call(ctx, "GET", path, nil, repeatSafe, &answer)
	if err != nil {
		return nil, node, err
	}
	ranges, err := parseRanges(path, answer.Ranges, count)
	return ranges, node, err
}

// fetchSegmentRanges asks for count IDs of the segment tag for a handle to cache. A scrambled
// tag's IDs form no ranges (its /ranges answers MODE_MISMATCH): they come from Leaf's list path,
// each as a range of one, served once like any range; listed remembers that for the handle.
func (c *Client) fetchSegmentRanges(ctx context.Context, tag string, count int64, listed *atomic.Bool) ([]IDRange, string, error) {
	if !listed.Load() {
		ranges, node, err := c.fetchRanges(ctx, tag, count)
		if CodeOf(err) != ModeMismatch {
			return ranges, node, err
		}
		listed.Store(true)
	}
	path := fmt.Sprintf("/v1/segment/%s?count=%d", url.PathEscape(tag), count)
	var answer struct {
		IDs []string `json:"ids"`
	}
	node, err := c.t.call(ctx, "GET", path, nil, repeatSafe, &answer)
	if err != nil {
		return nil, node, err
	}
	ids, err := parseIDs(answer.IDs)
	if err != nil {
		return nil, node, err
	}
	if int64(len(ids)) > count {
		return nil, node, &TransportError{Message: fmt.Sprintf("%s: %d IDs answered for %d asked", path, len(ids), count)}
	}
	seen := make(map[int64]struct{}, len(ids))
	ranges := make([]IDRange, 0, len(ids))
	for _, id := range ids {
		if _, twice := seen[id]; twice || id == math.MaxInt64 {
			return nil, node, &TransportError{Message: fmt.Sprintf("%s: ID %d twice or out of range", path, id)}
		}
		seen[id] = struct{}{}
		ranges = append(ranges, IDRange{Start: id, End: id + 1})
	}
	return ranges, node, nil
}

// MonotonicRange answers count (1 to 10,000) consecutive IDs of the monotonic tag, larger than
// every ID of the tag any client received before this call. One request, nothing cached.
func (c *Client) MonotonicRange(ctx context.Context, tag string, count int64) (IDRange, error) {
	ranges, _, err := c.fetchRanges(ctx, tag, count)
	if err != nil {
		return IDRange{}, err
	}
	if len(ranges) != 1 || ranges[0].Len() != count {
		return IDRange{}, &TransportError{Message: fmt.Sprintf("%s: not one range of %d IDs", tag, count)}
	}
	return ranges[0], nil
}

// MonotonicID answers one ID of the monotonic tag, larger than every ID of the tag any client
// received before this call.
func (c *Client) MonotonicID(ctx context.Context, tag string) (int64, error) {
	r, err := c.MonotonicRange(ctx, tag, 1)
	return r.Start, err
}

type idList struct {
	IDs []string `json:"ids"`
}

// Snowflake answers count (1 to 10,000) snowflake IDs in one request (never cached: they carry
// the time they were made).
func (c *Client) Snowflake(ctx context.Context, count int) ([]int64, error) {
	var answer idList
	if _, err := c.t.call(ctx, "GET", fmt.Sprintf("/v1/snowflake?count=%d", count), nil, repeatSafe, &answer); err != nil {
		return nil, err
	}
	return parseIDs(answer.IDs)
}

// SnowflakeID answers one snowflake ID.
func (c *Client) SnowflakeID(ctx context.Context) (int64, error) {
	ids, err := c.Snowflake(ctx, 1)
	if err != nil {
		return 0, err
	}
	if len(ids) != 1 {
		return 0, &TransportError{Message: "an empty snowflake answer"}
	}
	return ids[0], nil
}

func (c *Client) timeseq(ctx context.Context, ns string, shard, count int, extra string) ([]string, error) {
	path := fmt.Sprintf("/v1/timeseq/%s?shard=%d&count=%d%s", url.PathEscape(ns), shard, count, extra)
	var answer idList
	if _, err := c.t.call(ctx, "GET", path, nil, repeatSafe, &answer); err != nil {
		return nil, err
	}
	return answer.IDs, nil
}

// Timeseq answers count (1 to 10,000) long-form time-sequence IDs of namespace for shard.
func (c *Client) Timeseq(ctx context.Context, namespace string, shard, count int) ([]int64, error) {
	texts, err := c.timeseq(ctx, namespace, shard, count, "")
	if err != nil {
		return nil, err
	}
	return parseIDs(texts)
}

// TimeseqStrings answers count string-form IDs (prefix + yyyyMMddHHmmss + sequence + shard).
func (c *Client) TimeseqStrings(ctx context.Context, namespace string, shard, count int, prefix string) ([]string, error) {
	for _, r := range prefix {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return nil, fmt.Errorf("leafraft: a prefix is letters, digits, - and _ only, got %q", prefix)
		}
	}
	return c.timeseq(ctx, namespace, shard, count, "&format=string&prefix="+prefix)
}
