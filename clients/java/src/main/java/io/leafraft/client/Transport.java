package io.leafraft.client;

import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.ssl.SSLContext;

/**
 * Sending one request to the cluster: which node, how long, and whether it may be sent again.
 *
 * <p>A request that may be repeated (every read and every ID request: a range fetched twice only
 * burns IDs, gaps are allowed) fails over to the next node on a transport error or a 5xx or
 * transient answer, in rounds with a growing pause until the call's deadline. A write goes to the
 * next node only when the previous one refused the connection (nothing was sent) or refused it as
 * a node of another cluster; any other failure is the caller's answer: the server forwards writes
 * to the leader, and a write repeated after an unknown outcome could apply twice. The node that
 * answered last is asked first next time.
 */
final class Transport {
    static final String CLUSTER_ID_HEADER = "X-Leafraft-Cluster-Id";

    enum Repeat { SAFE, NEVER }

    /** An answer's body and the node that gave it. */
    record Answer(String body, String node) {}

    private final HttpClient reads;
    private final SSLContext ssl;
    private final Executor executor;
    private final boolean tls;
    private final String token;
    final Duration timeout;
    private final Duration attemptTimeout;
    private final boolean discover;
    private final List<String> seeds;
    private volatile List<String> nodes;
    private final AtomicInteger preferred = new AtomicInteger();
    final AtomicLong clusterId;
    final AtomicLong requests = new AtomicLong();
    private final AtomicLong refreshedAt = new AtomicLong(Long.MIN_VALUE);

    Transport(List<String> nodes, String token, SSLContext ssl, Duration timeout, Duration attemptTimeout,
            boolean discover, long clusterId, Executor executor) {
        this.ssl = ssl;
        this.tls = ssl != null;
        this.token = token;
        this.timeout = timeout;
        this.attemptTimeout = attemptTimeout;
        this.discover = discover;
        this.executor = executor;
        this.clusterId = new AtomicLong(clusterId);
        List<String> list = new ArrayList<>();
        for (String node : nodes) {
            list.add(baseUrl(node, tls));
        }
        this.seeds = List.copyOf(list);
        this.nodes = this.seeds;
        this.reads = http();
    }

    private HttpClient http() {
        HttpClient.Builder builder = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(attemptTimeout)
                .followRedirects(HttpClient.Redirect.NEVER)
                .executor(executor);
        if (ssl != null) {
            builder.sslContext(ssl);
        }
        return builder.build();
    }

    static String baseUrl(String node, boolean tls) {
        String trimmed = node.trim();
        while (trimmed.endsWith("/")) {
            trimmed = trimmed.substring(0, trimmed.length() - 1);
        }
        if (trimmed.contains("://")) {
            return trimmed;
        }
        return (tls ? "https://" : "http://") + trimmed;
    }

    List<String> nodes() {
        return nodes;
    }

    /** One attempt's failure; unsent: nothing reached a node that could act on it. */
    private static final class Failure extends Exception {
        private static final long serialVersionUID = 1L;
        final LeafraftException error;
        final boolean unsent;
        final boolean foreign;

        Failure(LeafraftException error, boolean unsent, boolean foreign) {
            super(error.getMessage(), null, false, false);
            this.error = error;
            this.unsent = unsent;
            this.foreign = foreign;
        }
    }

    Answer send(String method, String path, String body, Repeat repeat) {
        maybeRefresh();
        long started = System.nanoTime();
        long deadline = started + timeout.toNanos();
        long pauseMs = 20;
        LeafraftException last = null;
        while (true) {
            List<String> list = nodes;
            int first = preferred.get();
            boolean foreignRound = true;
            for (int offset = 0; offset < list.size(); offset++) {
                int at = (first + offset) % list.size();
                long remaining = deadline - System.nanoTime();
                if (remaining <= 0) {
                    foreignRound = false;
                    break;
                }
                try {
                    String answer = attempt(list.get(at), method, path, body, remaining);
                    preferred.set(at);
                    return new Answer(answer, list.get(at));
                } catch (Failure failure) {
                    boolean again = failure.foreign
                            || (repeat == Repeat.SAFE ? failure.error.isTransient() : failure.unsent);
                    if (!again) {
                        throw failure.error;
                    }
                    foreignRound &= failure.foreign;
                    last = failure.error;
                }
            }
            // Every node belongs to another cluster: that is the answer, not a reason to wait.
            if (foreignRound && last != null) {
                throw last;
            }
            if (repeat != Repeat.SAFE && last != null) {
                throw last;
            }
            long remaining = deadline - System.nanoTime();
            if (remaining <= 0) {
                if (last instanceof LeafraftApiException api && api.code() == ErrorCode.CLUSTER_MISMATCH) {
                    throw last;
                }
                throw new LeafraftTimeoutException(Duration.ofNanos(System.nanoTime() - started),
                        last == null ? "no attempt fitted in the time" : last.getMessage());
            }
            // Every node failed once: learn about members that joined (or moved), pause, go on.
            refresh();
            try {
                Thread.sleep(Math.max(0, Math.min(pauseMs, (deadline - System.nanoTime()) / 1_000_000)));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new LeafraftTransportException("interrupted", e);
            }
            pauseMs = Math.min(pauseMs * 2, 500);
        }
    }

    private String attempt(String node, String method, String path, String body, long remainingNanos) throws Failure {
        Duration budget = Duration.ofNanos(Math.max(1_000_000, Math.min(remainingNanos, attemptTimeout.toNanos())));
        String url = node + path;
        HttpRequest.Builder request;
        try {
            request = HttpRequest.newBuilder(URI.create(url)).timeout(budget);
        } catch (IllegalArgumentException e) {
            throw new Failure(new LeafraftTransportException(url + ": " + e.getMessage()), true, false);
        }
        request.method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                : HttpRequest.BodyPublishers.ofString(body, StandardCharsets.UTF_8));
        if (body != null) {
            request.header("Content-Type", "application/json");
        }
        if (token != null) {
            request.header("Authorization", "Bearer " + token);
        }
        long pinned = clusterId.get();
        if (pinned != 0) {
            request.header(CLUSTER_ID_HEADER, String.format("%016x", pinned));
        }
        requests.incrementAndGet();
        // A write goes on a connection of its own, never one the node may be closing meanwhile.
        HttpClient http = "GET".equals(method) ? reads : http();
        HttpResponse<String> response;
        try {
            response = http.send(request.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        } catch (ConnectException | HttpConnectTimeoutException e) {
            throw new Failure(new LeafraftTransportException(url + ": " + e, e), true, false);
        } catch (IOException e) {
            throw new Failure(new LeafraftTransportException(url + ": " + e, e), false, false);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure(new LeafraftTransportException(url + ": interrupted", e), false, false);
        }
        checkCluster(url, pinned, response);
        int status = response.statusCode();
        if (status >= 200 && status < 300) {
            return response.body();
        }
        LeafraftException error = apiError(url, status, response.body());
        // A node that knows no cluster yet refuses a pinned request without naming one.
        boolean foreign = pinned != 0 && status == 409 && error instanceof LeafraftApiException api
                && api.code() == ErrorCode.CLUSTER_MISMATCH;
        throw new Failure(error, foreign, foreign);
    }

    /**
     * Learns the cluster from the first answer that names one, and refuses an answer of another
     * cluster (a node of a second cluster at a member's address): never served from.
     */
    private void checkCluster(String url, long pinned, HttpResponse<String> response) throws Failure {
        String header = response.headers().firstValue(CLUSTER_ID_HEADER).orElse(null);
        if (header == null) {
            return;
        }
        long answered;
        try {
            answered = Long.parseUnsignedLong(header.trim(), 16);
        } catch (NumberFormatException e) {
            return;
        }
        if (answered == 0 || clusterId.compareAndSet(0, answered)) {
            return;
        }
        long expected = clusterId.get();
        if (answered == expected) {
            return;
        }
        String message = String.format("%s belongs to cluster %016x, this client talks to cluster %016x",
                url, answered, expected);
        throw new Failure(new LeafraftApiException(409, "CLUSTER_MISMATCH", message),
                pinned == expected && response.statusCode() == 409, true);
    }

    private static LeafraftException apiError(String url, int status, String body) {
        try {
            Object inner = Json.object(body).get("error");
            if (inner instanceof Map<?, ?> error && error.get("code") instanceof String code) {
                Object message = error.get("message");
                return new LeafraftApiException(status, code, message == null ? "" : message.toString());
            }
        } catch (IllegalArgumentException e) {
            // not the API's shape
        }
        String shown = body.length() > 200 ? body.substring(0, 200) : body;
        return new LeafraftTransportException(url + ": HTTP " + status + ": " + shown);
    }

    private void maybeRefresh() {
        if (!discover) {
            return;
        }
        long now = System.nanoTime();
        long last = refreshedAt.get();
        if (last != Long.MIN_VALUE && now - last < Duration.ofSeconds(30).toNanos()) {
            return;
        }
        if (refreshedAt.compareAndSet(last, now)) {
            refresh();
        }
    }

    /** The seeds and every member /v1/cluster names, from the first node that answers it. */
    void refresh() {
        if (!discover) {
            return;
        }
        List<String> list = nodes;
        int first = preferred.get();
        for (int offset = 0; offset < list.size(); offset++) {
            String node = list.get((first + offset) % list.size());
            Map<String, Object> status;
            try {
                status = Json.object(attempt(node, "GET", "/v1/cluster", null, attemptTimeout.toNanos()));
            } catch (Failure | IllegalArgumentException e) {
                continue;
            }
            if (!(status.get("nodes") instanceof Map<?, ?> members)) {
                continue;
            }
            List<String> listed = new ArrayList<>(seeds);
            for (Object addr : new TreeMap<>(members).values()) {
                String url = baseUrl(String.valueOf(addr), tls);
                if (!listed.contains(url)) {
                    listed.add(url);
                }
            }
            int keep = first < list.size() ? Math.max(0, listed.indexOf(list.get(first))) : 0;
            nodes = List.copyOf(listed);
            preferred.set(keep);
            return;
        }
    }
}
