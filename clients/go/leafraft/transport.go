package leafraft

// Sending one request to the cluster: which node, how long, and whether it may be sent again.
//
// A request that may be repeated (every read and every ID request: a range fetched twice only
// burns IDs, gaps are allowed) fails over to the next node on a transport error or a 5xx or
// transient answer, in rounds with a growing pause until the call's deadline. A write is sent to
// the next node only when the previous one refused the connection (nothing was sent) or refused
// it as a node of another cluster; any other failure is the caller's answer, since the server
// forwards writes to the leader and a write repeated after an unknown outcome could apply twice.
// The node that answered last is asked first next time.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ClusterIDHeader names the cluster a request is for and a node answers from (`docs/semantics.md#cluster-identity-and-versions`).
const ClusterIDHeader = "X-Leafraft-Cluster-Id"

type repeat int

const (
	// Reads and ID requests: any node, again and again until the deadline.
	repeatSafe repeat = iota
	// Writes: another node only when nothing was sent.
	repeatNever
)

const maxBody = 8 << 20

type transport struct {
	cfg        Config
	tls        bool
	reads      *http.Client // keep-alive pool for reads and ID requests
	writes     *http.Client // a fresh connection per write: never one the node may be closing
	seeds      []string
	mu         sync.RWMutex
	nodes      []string
	preferred  atomic.Int64
	clusterID  atomic.Uint64
	requests   atomic.Int64
	refreshMu  sync.Mutex
	refreshed  time.Time
	lastAnswer atomic.Value // string: the node that answered last
}

func baseURL(node string, tls bool) string {
	node = strings.TrimRight(strings.TrimSpace(node), "/")
	if strings.Contains(node, "://") {
		return node
	}
	if tls {
		return "https://" + node
	}
	return "http://" + node
}

func newTransport(cfg Config) (*transport, error) {
	if len(cfg.Nodes) == 0 {
		return nil, fmt.Errorf("leafraft: invalid configuration: no node given")
	}
	var tlsConfig *tls.Config
	pem := cfg.CAPEM
	if cfg.CAFile != "" {
		read, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("leafraft: invalid configuration: cannot read the CA file: %w", err)
		}
		pem = read
	}
	if pem != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("leafraft: invalid configuration: the CA holds no PEM certificate")
		}
		tlsConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	pooled := &http.Transport{
		TLSClientConfig:     tlsConfig,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 16,
		// Below a node's --header-read-timeout-ms (10 s by default), after which it closes an
		// idle kept-alive connection.
		IdleConnTimeout:       5 * time.Second,
		ResponseHeaderTimeout: cfg.AttemptTimeout,
		ForceAttemptHTTP2:     false,
	}
	fresh := &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true, ForceAttemptHTTP2: false}
	t := &transport{
		cfg:    cfg,
		tls:    pem != nil,
		reads:  &http.Client{Transport: pooled, CheckRedirect: noRedirect},
		writes: &http.Client{Transport: fresh, CheckRedirect: noRedirect},
	}
	for _, node := range cfg.Nodes {
		t.seeds = append(t.seeds, baseURL(node, t.tls))
	}
	t.nodes = append([]string(nil), t.seeds...)
	t.clusterID.Store(cfg.ClusterID)
	t.lastAnswer.Store("")
	return t, nil
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (t *transport) nodeList() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.nodes
}

// failure is one attempt's failure; unsent: the request surely never reached a node that could
// act on it; foreign: the node belongs to another cluster.
type failure struct {
	err     error
	unsent  bool
	foreign bool
}

// call sends the request and decodes the JSON answer into out (when not nil).
func (t *transport) call(ctx context.Context, method, path string, body any, rep repeat, out any) (string, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return "", fmt.Errorf("leafraft: invalid request: %w", err)
		}
	}
	answer, node, err := t.send(ctx, method, path, payload, rep)
	if err != nil {
		return node, err
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return node, &TransportError{Message: fmt.Sprintf("%s%s: unexpected answer: %v", node, path, err)}
		}
	}
	return node, nil
}

// send answers the body of the first successful answer and the node that gave it.
func (t *transport) send(ctx context.Context, method, path string, payload []byte, rep repeat) ([]byte, string, error) {
	t.maybeRefresh(ctx)
	started := time.Now()
	deadline := started.Add(t.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	pause := 20 * time.Millisecond
	var last error
	for {
		nodes := t.nodeList()
		first := int(t.preferred.Load())
		foreignRound := true
		for offset := 0; offset < len(nodes); offset++ {
			at := (first + offset) % len(nodes)
			remaining := time.Until(deadline)
			if remaining <= 0 {
				foreignRound = false
				break
			}
			answer, f := t.attempt(ctx, nodes[at], method, path, payload, remaining)
			if f == nil {
				t.preferred.Store(int64(at))
				t.lastAnswer.Store(nodes[at])
				return answer, nodes[at], nil
			}
			if ctx.Err() != nil {
				return nil, "", t.giveUp(ctx, f.err, started)
			}
			again := f.foreign
			if rep == repeatSafe {
				again = again || transient(f.err)
			} else {
				again = again || f.unsent
			}
			if !again {
				return nil, "", f.err
			}
			foreignRound = foreignRound && f.foreign
			last = f.err
		}
		// Every node belongs to another cluster: that is the answer, not a reason to wait.
		if foreignRound && last != nil {
			return nil, "", last
		}
		remaining := time.Until(deadline)
		if rep != repeatSafe || remaining <= 0 {
			if rep != repeatSafe && last != nil {
				return nil, "", last
			}
			return nil, "", t.giveUp(ctx, last, started)
		}
		// Every node failed once: learn about members that joined (or moved), pause, go on.
		t.refresh(ctx)
		if pause > remaining {
			pause = remaining
		}
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, "", t.giveUp(ctx, last, started)
		case <-timer.C:
		}
		if pause *= 2; pause > 500*time.Millisecond {
			pause = 500 * time.Millisecond
		}
	}
}

func (t *transport) giveUp(ctx context.Context, last error, started time.Time) error {
	if IsCode(last, ClusterMismatch) {
		return last
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	text := "no attempt fitted in the time"
	if last != nil {
		text = last.Error()
	}
	return &TimeoutError{Waited: time.Since(started), Last: text, cause: deadlineCause(ctx)}
}

func (t *transport) attempt(ctx context.Context, node, method, path string, payload []byte, remaining time.Duration) ([]byte, *failure) {
	budget := t.cfg.AttemptTimeout
	if remaining < budget {
		budget = remaining
	}
	actx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	url := node + path
	var reader io.Reader
	if payload != nil {
		reader = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(actx, method, url, reader)
	if err != nil {
		return nil, &failure{err: &TransportError{Message: err.Error()}, unsent: true}
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if t.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.cfg.Token)
	}
	pinned := t.clusterID.Load()
	if pinned != 0 {
		req.Header.Set(ClusterIDHeader, fmt.Sprintf("%016x", pinned))
	}
	client := t.reads
	if method != http.MethodGet {
		client = t.writes
	}
	t.requests.Add(1)
	resp, err := client.Do(req)
	if err != nil {
		return nil, &failure{
			err:    &TransportError{Message: fmt.Sprintf("%s: %v", url, err)},
			unsent: errors.Is(err, syscall.ECONNREFUSED),
		}
	}
	defer resp.Body.Close()
	if f := t.checkCluster(url, pinned, resp); f != nil {
		return nil, f
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, &failure{err: &TransportError{Message: fmt.Sprintf("%s: %v", url, err)}}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return answer, nil
	}
	apiErr := apiError(url, resp.StatusCode, answer)
	// A node that knows no cluster yet refuses a pinned request without naming one.
	foreign := pinned != 0 && resp.StatusCode == 409 && IsCode(apiErr, ClusterMismatch)
	return nil, &failure{err: apiErr, unsent: foreign, foreign: foreign}
}

// checkCluster learns the cluster from the first answer that names one, and refuses an answer of
// another cluster (a node of a second cluster at a member's address): never served from.
func (t *transport) checkCluster(url string, pinned uint64, resp *http.Response) *failure {
	text := resp.Header.Get(ClusterIDHeader)
	if text == "" {
		return nil
	}
	answered, err := strconv.ParseUint(text, 16, 64)
	if err != nil || answered == 0 {
		return nil
	}
	if t.clusterID.CompareAndSwap(0, answered) {
		return nil
	}
	expected := t.clusterID.Load()
	if answered == expected {
		return nil
	}
	return &failure{
		err: &Error{Status: 409, Code: ClusterMismatch, Message: fmt.Sprintf(
			"%s belongs to cluster %016x, this client talks to cluster %016x", url, answered, expected)},
		unsent:  pinned == expected && resp.StatusCode == 409,
		foreign: true,
	}
}

func apiError(url string, status int, body []byte) error {
	var shape struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &shape) == nil && shape.Error != nil && shape.Error.Code != "" {
		return &Error{Status: status, Code: ErrorCode(shape.Error.Code), Message: shape.Error.Message}
	}
	text := string(body)
	if len(text) > 200 {
		text = text[:200]
	}
	return &TransportError{Message: fmt.Sprintf("%s: HTTP %d: %s", url, status, text)}
}

func (t *transport) maybeRefresh(ctx context.Context) {
	if t.cfg.NoDiscovery {
		return
	}
	t.refreshMu.Lock()
	due := t.refreshed.IsZero() || time.Since(t.refreshed) >= 30*time.Second
	if due {
		t.refreshed = time.Now()
	}
	t.refreshMu.Unlock()
	if due {
		t.refresh(ctx)
	}
}

// refresh makes the node list the seeds plus every member /v1/cluster names, from the first node
// that answers it; the preferred node stays preferred where it still is in the list.
func (t *transport) refresh(ctx context.Context) {
	if t.cfg.NoDiscovery {
		return
	}
	nodes := t.nodeList()
	first := int(t.preferred.Load())
	for offset := 0; offset < len(nodes); offset++ {
		node := nodes[(first+offset)%len(nodes)]
		answer, f := t.attempt(ctx, node, http.MethodGet, "/v1/cluster", nil, t.cfg.AttemptTimeout)
		if f != nil {
			continue
		}
		var status struct {
			Nodes map[string]string `json:"nodes"`
		}
		if json.Unmarshal(answer, &status) != nil {
			continue
		}
		list := append([]string(nil), t.seeds...)
		ids := make([]string, 0, len(status.Nodes))
		for id := range status.Nodes {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			url := baseURL(status.Nodes[id], t.tls)
			if !contains(list, url) {
				list = append(list, url)
			}
		}
		preferred := 0
		if first < len(nodes) {
			for i, n := range list {
				if n == nodes[first] {
					preferred = i
				}
			}
		}
		t.mu.Lock()
		t.nodes = list
		t.mu.Unlock()
		t.preferred.Store(int64(preferred))
		return
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
