package leafraft

// The calls a service needs at start (create its tag or namespace if missing), reads of tags and
// of the cluster, and decoding. Writes go to one node and to another only when nothing was sent.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
)

// NewTag is the body of POST /v1/tags; zero fields take the server's defaults.
type NewTag struct {
	Tag         string `json:"tag"`
	Step        int64  `json:"step,omitempty"`
	MaxID       int64  `json:"-"`
	Description string `json:"description,omitempty"`
	// Mode is "segment" (the default) or "monotonic".
	Mode string `json:"mode,omitempty"`
}

func (t NewTag) MarshalJSON() ([]byte, error) {
	type plain NewTag
	out := struct {
		plain
		MaxID string `json:"max_id,omitempty"`
	}{plain: plain(t)}
	if t.MaxID > 0 {
		out.MaxID = strconv.FormatInt(t.MaxID, 10)
	}
	return json.Marshal(out)
}

// Tag is a tag as the answering node knows it.
type Tag struct {
	Tag         string          `json:"tag"`
	MaxID       string          `json:"max_id"`
	Step        int64           `json:"step"`
	Description string          `json:"description"`
	Mode        string          `json:"mode"`
	CreatedAt   string          `json:"created_at"`
	UpdatedAt   string          `json:"updated_at"`
	Buffers     json.RawMessage `json:"buffers"`
}

// CreateTagIfMissing creates the tag unless it exists: created is false when it was there
// (TAG_EXISTS). Sent once (to a second node only when the first refused the connection): if the
// outcome is unknown (a timeout, NO_LEADER) the error says so and calling again is safe.
// Two identical creates within one millisecond are one create to the server: both answer
// created (the second changes nothing).
func (c *Client) CreateTagIfMissing(ctx context.Context, tag NewTag) (created bool, err error) {
	_, err = c.t.call(ctx, "POST", "/v1/tags", tag, repeatNever, nil)
	if IsCode(err, TagExists) {
		return false, nil
	}
	return err == nil, err
}

// GetTag reads a tag from the answering node.
func (c *Client) GetTag(ctx context.Context, tag string) (Tag, error) {
	var answer Tag
	_, err := c.t.call(ctx, "GET", "/v1/tags/"+url.PathEscape(tag), nil, repeatSafe, &answer)
	return answer, err
}

// NewNamespace is the body of POST /v1/timeseq; zero fields take the server's defaults.
type NewNamespace struct {
	Namespace   string `json:"namespace"`
	Epoch       string `json:"epoch,omitempty"`
	TimeZone    string `json:"time_zone,omitempty"`
	ShardBits   int    `json:"shard_bits,omitempty"`
	SeqBits     int    `json:"seq_bits,omitempty"`
	Description string `json:"description,omitempty"`
}

// CreateNamespaceIfMissing creates the time-sequence namespace unless it exists (then created
// is false). Sent once, like CreateTagIfMissing.
func (c *Client) CreateNamespaceIfMissing(ctx context.Context, ns NewNamespace) (created bool, err error) {
	_, err = c.t.call(ctx, "POST", "/v1/timeseq", ns, repeatNever, nil)
	if IsCode(err, NamespaceExists) {
		return false, nil
	}
	return err == nil, err
}

// ClusterStatus is /v1/cluster as the answering node sees it.
type ClusterStatus struct {
	NodeID    uint64            `json:"node_id"`
	Role      string            `json:"role"`
	LeaderID  *uint64           `json:"leader_id"`
	Term      uint64            `json:"term"`
	Voters    []uint64          `json:"voters"`
	Learners  []uint64          `json:"learners"`
	Nodes     map[string]string `json:"nodes"`
	ClusterID string            `json:"cluster_id"`
}

// Cluster reads /v1/cluster from the first node that answers.
func (c *Client) Cluster(ctx context.Context) (ClusterStatus, error) {
	var answer ClusterStatus
	_, err := c.t.call(ctx, "GET", "/v1/cluster", nil, repeatSafe, &answer)
	return answer, err
}

// DecodedSnowflake is a snowflake ID taken apart by a server.
type DecodedSnowflake struct {
	ID          string `json:"id"`
	TimestampMs int64  `json:"timestamp_ms"`
	Time        string `json:"time"`
	WorkerID    int64  `json:"worker_id"`
	Sequence    int64  `json:"sequence"`
}

// DecodeSnowflake takes a snowflake ID apart with the cluster's own layout (one request).
func (c *Client) DecodeSnowflake(ctx context.Context, id int64) (DecodedSnowflake, error) {
	var answer DecodedSnowflake
	_, err := c.t.call(ctx, "GET", fmt.Sprintf("/v1/snowflake/decode/%d", id), nil, repeatSafe, &answer)
	return answer, err
}

// DecodedTimeseq is a time-sequence ID (long or string form) taken apart by a server.
type DecodedTimeseq struct {
	ID       string `json:"id"`
	Seconds  int64  `json:"seconds"`
	Time     string `json:"time"`
	Shard    int64  `json:"shard"`
	Sequence int64  `json:"sequence"`
}

// DecodeTimeseq takes a time-sequence ID of namespace apart (one request).
func (c *Client) DecodeTimeseq(ctx context.Context, namespace, id string) (DecodedTimeseq, error) {
	var answer DecodedTimeseq
	path := fmt.Sprintf("/v1/timeseq/%s/decode/%s", url.PathEscape(namespace), url.PathEscape(id))
	_, err := c.t.call(ctx, "GET", path, nil, repeatSafe, &answer)
	return answer, err
}

// Layout is a snowflake layout: milliseconds since Epoch, then worker, then sequence bits.
type Layout struct {
	EpochMs      int64
	TimeBits     uint
	WorkerBits   uint
	SequenceBits uint
}

// LeafLayout is the default layout (Leaf's and Twitter's): epoch 1288834974657, 41/10/12 bits.
var LeafLayout = Layout{EpochMs: 1288834974657, TimeBits: 41, WorkerBits: 10, SequenceBits: 12}

// SnowflakeParts is a snowflake ID taken apart locally.
type SnowflakeParts struct {
	TimestampMs int64
	Worker      int64
	Sequence    int64
}

// Decode takes id apart with this layout, without asking a server.
func (l Layout) Decode(id int64) SnowflakeParts {
	seqMask := int64(1)<<l.SequenceBits - 1
	workerMask := int64(1)<<l.WorkerBits - 1
	timeMask := int64(1)<<l.TimeBits - 1
	return SnowflakeParts{
		TimestampMs: (id>>(l.WorkerBits+l.SequenceBits))&timeMask + l.EpochMs,
		Worker:      (id >> l.SequenceBits) & workerMask,
		Sequence:    id & seqMask,
	}
}
