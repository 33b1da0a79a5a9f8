"""Sending one request to the cluster: which node, how long, and whether it may be sent again.

A request that may be repeated (every read and every ID request: a range fetched twice only burns
IDs, gaps are allowed) fails over to the next node on a transport error or a 5xx/transient answer,
in rounds with a growing pause until the call's deadline. A write goes to the next node only when
the previous one refused the connection (nothing was sent) or refused it as a node of another
cluster; any other failure is the caller's answer. The node that answered last is asked first.

HTTP is the standard library's http.client, with a small pool of kept-alive connections per node
(urllib.request would open a connection per request: it sends Connection: close). Writes always
use a fresh connection, never one the node may be closing.
"""

import http.client
import json
import socket
import ssl
import threading
import time
from typing import List, Optional, Tuple
from urllib.parse import urlsplit

from .errors import ApiError, ConfigError, ErrorCode, Timeout, TransportError, api_error

CLUSTER_ID_HEADER = "X-Leafraft-Cluster-Id"
SAFE, NEVER = "safe", "never"
#: Below a node's --header-read-timeout-ms (10 s by default), after which it closes an idle
#: kept-alive connection.
_IDLE_SECONDS = 4.0
_MAX_IDLE = 8
_MAX_BODY = 8 << 20


def base_url(node: str, tls: bool) -> str:
    node = node.strip().rstrip("/")
    if "://" in node:
        return node
    return ("https://" if tls else "http://") + node


class _Failure(Exception):
    def __init__(self, error: Exception, unsent: bool = False, foreign: bool = False):
        super().__init__(str(error))
        self.error = error
        self.unsent = unsent
        self.foreign = foreign


def _transient(error: Exception) -> bool:
    if isinstance(error, ApiError):
        return error.transient
    return isinstance(error, TransportError)


class _Pool:
    """Idle kept-alive connections to one node."""

    def __init__(self, base: str, context: Optional[ssl.SSLContext]):
        parts = urlsplit(base)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.https else 80)
        self.context = context
        self.idle: List[Tuple[float, http.client.HTTPConnection]] = []
        self.lock = threading.Lock()

    def get(self, timeout: float, fresh: bool) -> http.client.HTTPConnection:
        if not fresh:
            now = time.monotonic()
            with self.lock:
                while self.idle:
                    since, conn = self.idle.pop()
                    if now - since < _IDLE_SECONDS:
                        conn.timeout = timeout
                        if conn.sock is not None:
                            conn.sock.settimeout(timeout)
                        return conn
                    conn.close()
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def put(self, conn: http.client.HTTPConnection) -> None:
        with self.lock:
            if len(self.idle) < _MAX_IDLE:
                self.idle.append((time.monotonic(), conn))
                return
        conn.close()

    def close(self) -> None:
        with self.lock:
            for _, conn in self.idle:
                conn.close()
            self.idle.clear()


class Transport:
    def __init__(self, nodes, token, ca_file, ca_pem, timeout, attempt_timeout, discover, cluster_id):
        if not nodes:
            raise ConfigError("no node given")
        if timeout <= 0:
            raise ConfigError("the timeout must be above zero")
        self.context: Optional[ssl.SSLContext] = None
        if ca_file is not None or ca_pem is not None:
            try:
                self.context = ssl.create_default_context(cafile=ca_file, cadata=ca_pem)
            except (OSError, ssl.SSLError) as error:
                raise ConfigError(f"cannot use the CA: {error}") from error
        self.tls = self.context is not None
        self.token = token
        self.timeout = timeout
        self.attempt_timeout = min(attempt_timeout, timeout)
        self.discover = discover
        self.seeds = [base_url(node, self.tls) for node in nodes]
        self.nodes = list(self.seeds)
        self.preferred = 0
        self.cluster_id = cluster_id or 0
        self.requests = 0
        self.pools = {}
        self.lock = threading.Lock()
        self.refreshed_at: Optional[float] = None

    def _pool(self, node: str) -> _Pool:
        with self.lock:
            pool = self.pools.get(node)
            if pool is None:
                pool = self.pools[node] = _Pool(node, self.context)
            return pool

    def close(self) -> None:
        with self.lock:
            pools = list(self.pools.values())
        for pool in pools:
            pool.close()

    def call(self, method: str, path: str, body=None, repeat: str = SAFE, timeout: Optional[float] = None):
        """The decoded JSON answer of the first node that serves the request, and that node."""
        payload = None if body is None else json.dumps(body).encode()
        answer, node = self.send(method, path, payload, repeat, timeout)
        try:
            return json.loads(answer), node
        except ValueError as error:
            raise TransportError(f"{node}{path}: unexpected answer: {error}") from None

    def send(self, method, path, payload, repeat, timeout=None):
        self._maybe_refresh()
        started = time.monotonic()
        deadline = started + (self.timeout if timeout is None else min(timeout, self.timeout))
        pause = 0.02
        last: Optional[Exception] = None
        while True:
            nodes = self.nodes
            first = self.preferred
            foreign_round = True
            for offset in range(len(nodes)):
                at = (first + offset) % len(nodes)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    foreign_round = False
                    break
                try:
                    answer = self._attempt(nodes[at], method, path, payload, remaining)
                except _Failure as failure:
                    again = failure.foreign or (_transient(failure.error) if repeat == SAFE else failure.unsent)
                    if not again:
                        raise failure.error from None
                    foreign_round = foreign_round and failure.foreign
                    last = failure.error
                    continue
                self.preferred = at
                return answer, nodes[at]
            # Every node belongs to another cluster: that is the answer, not a reason to wait.
            if foreign_round and last is not None:
                raise last
            remaining = deadline - time.monotonic()
            if repeat != SAFE and last is not None:
                raise last
            if remaining <= 0:
                if isinstance(last, ApiError) and last.code == ErrorCode.CLUSTER_MISMATCH:
                    raise last
                raise Timeout(time.monotonic() - started, str(last) if last else "no attempt fitted in the time")
            # Every node failed once: learn about members that joined (or moved), pause, go on.
            self.refresh()
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.5)

    def _attempt(self, node, method, path, payload, remaining):
        budget = max(0.001, min(remaining, self.attempt_timeout))
        write = method != "GET"
        pool = self._pool(node)
        conn = pool.get(budget, fresh=write)
        headers = {}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        pinned = self.cluster_id
        if pinned:
            headers[CLUSTER_ID_HEADER] = f"{pinned:016x}"
        url = node + path
        self.requests += 1
        try:
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            answer = response.read(_MAX_BODY)
        except ConnectionRefusedError as error:
            conn.close()
            raise _Failure(TransportError(f"{url}: {error}"), unsent=True) from None
        except (OSError, http.client.HTTPException) as error:
            conn.close()
            text = "timed out" if isinstance(error, socket.timeout) else repr(error)
            raise _Failure(TransportError(f"{url}: {text}")) from None
        if write or response.will_close:
            conn.close()
        else:
            pool.put(conn)
        self._check_cluster(url, pinned, response.status, response.getheader(CLUSTER_ID_HEADER))
        if 200 <= response.status < 300:
            return answer
        error = _api_error(url, response.status, answer)
        # A node that knows no cluster yet refuses a pinned request without naming one.
        foreign = bool(pinned) and response.status == 409 and getattr(error, "code", None) == ErrorCode.CLUSTER_MISMATCH
        raise _Failure(error, unsent=foreign, foreign=foreign)

    def _check_cluster(self, url, pinned, status, header):
        """Learns the cluster from the first answer that names one; refuses an answer of another
        cluster (a node of a second cluster at a member's address): never served from."""
        if not header:
            return
        try:
            answered = int(header, 16)
        except ValueError:
            return
        if answered == 0:
            return
        with self.lock:
            if self.cluster_id == 0:
                self.cluster_id = answered
            expected = self.cluster_id
        if answered == expected:
            return
        message = f"{url} belongs to cluster {answered:016x}, this client talks to cluster {expected:016x}"
        raise _Failure(api_error(409, "CLUSTER_MISMATCH", message), unsent=(pinned == expected and status == 409), foreign=True)

    def _maybe_refresh(self):
        if not self.discover:
            return
        now = time.monotonic()
        with self.lock:
            due = self.refreshed_at is None or now - self.refreshed_at >= 30
            if due:
                self.refreshed_at = now
        if due:
            self.refresh()

    def refresh(self):
        """The seeds and every member /v1/cluster names, from the first node that answers it."""
        if not self.discover:
            return
        nodes = self.nodes
        first = self.preferred
        for offset in range(len(nodes)):
            node = nodes[(first + offset) % len(nodes)]
            try:
                status = json.loads(self._attempt(node, "GET", "/v1/cluster", None, self.attempt_timeout))
                members = status["nodes"]
            except (_Failure, ValueError, KeyError, TypeError):
                continue
            listed = list(self.seeds)
            for key in sorted(members):
                url = base_url(members[key], self.tls)
                if url not in listed:
                    listed.append(url)
            preferred = listed.index(nodes[first]) if first < len(nodes) and nodes[first] in listed else 0
            self.nodes = listed
            self.preferred = preferred
            return


def _api_error(url: str, status: int, body: bytes) -> Exception:
    try:
        shape = json.loads(body)
        inner = shape["error"]
        return api_error(status, str(inner["code"]), str(inner.get("message", "")))
    except (ValueError, KeyError, TypeError):
        return TransportError(f"{url}: HTTP {status}: {body[:200]!r}")
