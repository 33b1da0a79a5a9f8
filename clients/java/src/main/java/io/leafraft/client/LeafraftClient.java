package io.leafraft.client;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * A client of one leafraft cluster; thread-safe, create one per process and keep it.
 *
 * <pre>{@code
 * try (LeafraftClient client = LeafraftClient.builder().nodes("10.0.0.1:8080", "10.0.0.2:8080").build()) {
 *     client.createTagIfMissing("order", 1000);
 *     long id = client.nextId("order");   // from the local range: no request while it lasts
 * }
 * }</pre>
 *
 * <h2>What is guaranteed</h2>
 * <ul>
 *   <li>No ID is handed out twice: every ID comes from a range the cluster committed to this
 *       request alone; each range is used once, by one handle, in the order it came, whichever
 *       node answered it (a failover never makes a range be served again); each of its IDs goes to
 *       one caller.</li>
 *   <li>IDs are not in a global order: two processes (or one after a failover) interleave ranges.
 *       Monotonic tags ({@link #monotonicId}), snowflake and time-sequence IDs are never cached:
 *       each call is one request.</li>
 *   <li>Gaps: {@link #close()} and {@link Segment#close()} drop the unused IDs of the current and
 *       next range; they are never served again, by anyone.</li>
 *   <li>No unbounded wait: a call that cannot be served within the timeout throws
 *       {@link LeafraftTimeoutException}, or the server's own error ({@link LeafraftApiException}
 *       with its {@link ErrorCode}) as soon as one is definite.</li>
 *   <li>Only what is safe to repeat is repeated on another node: ID requests and reads. A write
 *       goes to a second node only when the first refused the connection or is of another
 *       cluster.</li>
 *   <li>Pinning: the cluster ID ({@code X-Leafraft-Cluster-Id}) is learnt from the first node that
 *       answers (or given to the builder) and sent with every request; a node of another cluster is
 *       never served from ({@code CLUSTER_MISMATCH}).</li>
 * </ul>
 */
public final class LeafraftClient implements AutoCloseable {
    /** The server's most IDs per request. */
    public static final int MAX_PER_REQUEST = 10_000;

    private final Transport transport;
    private final ExecutorService executor;
    private final Duration timeout;
    private final long rangeMin;
    private final long rangeMax;
    private final Duration rangeLasting;
    private final ConcurrentHashMap<String, Segment> segments = new ConcurrentHashMap<>();
    private volatile boolean closed;

    private LeafraftClient(Builder builder, SSLContext ssl) {
        AtomicInteger threads = new AtomicInteger();
        this.executor = Executors.newCachedThreadPool(task -> {
            Thread thread = new Thread(task, "leafraft-client-" + threads.incrementAndGet());
            thread.setDaemon(true);
            return thread;
        });
        this.timeout = builder.timeout;
        Duration attempt = builder.attemptTimeout.compareTo(builder.timeout) > 0 ? builder.timeout : builder.attemptTimeout;
        this.rangeMin = builder.rangeMin;
        this.rangeMax = builder.rangeMax;
        this.rangeLasting = builder.rangeLasting;
        this.transport = new Transport(builder.nodes, builder.token, ssl, builder.timeout, attempt, builder.discover,
                builder.clusterId, executor);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Settings of a {@link LeafraftClient}; only {@link #nodes} is required. */
    public static final class Builder {
        private List<String> nodes = List.of();
        private String token;
        private Path caFile;
        private String caPem;
        private Duration timeout = Duration.ofSeconds(10);
        private Duration attemptTimeout = Duration.ofSeconds(2);
        private boolean discover = true;
        private long clusterId;
        private long rangeMin = 1000;
        private long rangeMax = MAX_PER_REQUEST;
        private Duration rangeLasting = Duration.ofSeconds(60);

        private Builder() {}

        /** The nodes to start from, {@code host:port} or {@code http(s)://host:port}. */
        public Builder nodes(String... nodes) {
            return nodes(List.of(nodes));
        }

        public Builder nodes(Collection<String> nodes) {
            this.nodes = List.copyOf(nodes);
            return this;
        }

        /** Sent as {@code Authorization: Bearer} (a client token, or the admin token for admin calls). */
        public Builder token(String token) {
            this.token = token;
            return this;
        }

        /** The CA (PEM) that signs the nodes' certificates: only it is trusted; host:port means https. */
        public Builder caFile(Path caFile) {
            this.caFile = caFile;
            return this;
        }

        public Builder caPem(String pem) {
            this.caPem = pem;
            return this;
        }

        /** The most one call may take, failover and waiting for a range included [10 s]. */
        public Builder timeout(Duration timeout) {
            this.timeout = timeout;
            return this;
        }

        /** The most one HTTP attempt on one node may take [the smaller of the timeout and 2 s]. */
        public Builder attemptTimeout(Duration attemptTimeout) {
            this.attemptTimeout = attemptTimeout;
            return this;
        }

        /** Whether to add the members {@code /v1/cluster} names to the given nodes [true]. */
        public Builder discover(boolean discover) {
            this.discover = discover;
            return this;
        }

        /** Pins the cluster (its ID as /v1/cluster shows it, in hex); by default learnt on first contact. */
        public Builder clusterId(String hex) {
            this.clusterId = Long.parseUnsignedLong(hex, 16);
            return this;
        }

        public Builder clusterId(long clusterId) {
            this.clusterId = clusterId;
            return this;
        }

        /**
         * Leaf's dynamic step for local ranges: between {@code min} and {@code max} IDs per fetch
         * [1,000 and 10,000]; a range used up faster than {@code lasting} doubles the next, slower
         * than twice it halves it [60 s].
         */
        public Builder rangeSize(long min, long max, Duration lasting) {
            this.rangeMin = Math.max(1, Math.min(min, MAX_PER_REQUEST));
            this.rangeMax = Math.max(this.rangeMin, Math.min(max, MAX_PER_REQUEST));
            this.rangeLasting = lasting;
            return this;
        }

        public LeafraftClient build() {
            if (nodes.isEmpty()) {
                throw new IllegalArgumentException("no node given");
            }
            if (timeout.isZero() || timeout.isNegative()) {
                throw new IllegalArgumentException("the timeout must be above zero");
            }
            return new LeafraftClient(this, sslContext());
        }

        private SSLContext sslContext() {
            if (caFile == null && caPem == null) {
                return null;
            }
            try {
                byte[] pem = caFile != null ? Files.readAllBytes(caFile) : caPem.getBytes(StandardCharsets.US_ASCII);
                Collection<? extends Certificate> certificates = CertificateFactory.getInstance("X.509")
                        .generateCertificates(new ByteArrayInputStream(pem));
                if (certificates.isEmpty()) {
                    throw new IllegalArgumentException("the CA holds no certificate");
                }
                KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
                store.load(null, null);
                int i = 0;
                for (Certificate certificate : certificates) {
                    store.setCertificateEntry("ca" + i++, certificate);
                }
                TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
                trust.init(store);
                SSLContext context = SSLContext.getInstance("TLS");
                context.init(null, trust.getTrustManagers(), null);
                return context;
            } catch (IOException | GeneralSecurityException e) {
                throw new IllegalArgumentException("cannot use the CA: " + e.getMessage(), e);
            }
        }
    }

    Duration timeout() {
        return timeout;
    }

    long rangeMin() {
        return rangeMin;
    }

    long rangeMax() {
        return rangeMax;
    }

    Duration rangeLasting() {
        return rangeLasting;
    }

    ExecutorService executor() {
        return executor;
    }

    // --- segment IDs from local ranges

    /** The handle on {@code tag}'s IDs; every call for the same tag answers the same one. */
    public Segment segment(String tag) {
        Segment segment = segments.get(tag);
        if (segment != null) {
            return segment;
        }
        segment = segments.computeIfAbsent(tag, t -> new Segment(this, t));
        if (closed) {
            segment.close();
        }
        return segment;
    }

    /** One ID of {@code tag} from its local range: {@code segment(tag).nextId()}. */
    public long nextId(String tag) {
        return segment(tag).nextId();
    }

    public CompletableFuture<Long> nextIdAsync(String tag) {
        return segment(tag).nextIdAsync();
    }

    record Ranges(List<IdRange> ranges, String node) {}

    /** count IDs of tag as ranges; safe to repeat (a range fetched and lost is a gap). */
    Ranges fetchRanges(String tag, long count) {
        checkOpen();
        String path = "/v1/segment/" + part(tag) + "/ranges?count=" + count;
        Transport.Answer answer = transport.send("GET", path, null, Transport.Repeat.SAFE);
        List<IdRange> ranges = new ArrayList<>();
        long total = 0;
        try {
            for (Object item : (List<?>) Json.object(answer.body()).get("ranges")) {
                Map<?, ?> range = (Map<?, ?>) item;
                long start = id(range.get("start"));
                long end = id(range.get("end"));
                if (end <= start) {
                    throw new LeafraftTransportException(path + ": an empty or reversed range");
                }
                total += end - start;
                ranges.add(new IdRange(start, end));
            }
        } catch (ClassCastException | NullPointerException | IllegalArgumentException e) {
            throw new LeafraftTransportException(path + ": unexpected answer: " + e.getMessage(), e);
        }
        if (total > count) {
            throw new LeafraftTransportException(path + ": " + total + " IDs answered for " + count + " asked");
        }
        return new Ranges(ranges, answer.node());
    }

    /**
     * count IDs of the segment tag for a handle to cache. A scrambled tag's IDs form no ranges
     * (its /ranges answers MODE_MISMATCH): they come from Leaf's list path, each as a range of
     * one, served once like any range; listed remembers that for the handle.
     */
    Ranges fetchSegmentRanges(String tag, long count, java.util.concurrent.atomic.AtomicBoolean listed) {
        if (!listed.get()) {
            try {
                return fetchRanges(tag, count);
            } catch (LeafraftApiException e) {
                if (e.code() != ErrorCode.MODE_MISMATCH) {
                    throw e;
                }
                listed.set(true);
            }
        }
        checkOpen();
        String path = "/v1/segment/" + part(tag) + "?count=" + count;
        Transport.Answer answer = transport.send("GET", path, null, Transport.Repeat.SAFE);
        List<IdRange> ranges = new ArrayList<>();
        java.util.Set<Long> seen = new java.util.HashSet<>();
        try {
            for (Object item : (List<?>) Json.object(answer.body()).get("ids")) {
                long id = id(item);
                if (id == Long.MAX_VALUE || !seen.add(id)) {
                    throw new LeafraftTransportException(path + ": ID " + id + " twice or out of range");
                }
                ranges.add(new IdRange(id, id + 1));
            }
        } catch (ClassCastException | NullPointerException | IllegalArgumentException e) {
            throw new LeafraftTransportException(path + ": unexpected answer: " + e.getMessage(), e);
        }
        if (ranges.size() > count) {
            throw new LeafraftTransportException(path + ": " + ranges.size() + " IDs answered for " + count + " asked");
        }
        return new Ranges(ranges, answer.node());
    }

    private static long id(Object text) {
        long value = Long.parseLong(String.valueOf(text));
        if (value < 0) {
            throw new IllegalArgumentException("a negative ID");
        }
        return value;
    }

    private static String part(String text) {
        return URLEncoder.encode(text, StandardCharsets.UTF_8).replace("+", "%20");
    }

    // --- pass-through IDs: never cached

    /**
     * {@code count} (1 to 10,000) consecutive IDs of the monotonic {@code tag}, larger than every
     * ID of the tag any client received before this call. One request; nothing is kept.
     */
    public IdRange monotonicRange(String tag, int count) {
        List<IdRange> ranges = fetchRanges(tag, count).ranges();
        if (ranges.size() != 1 || ranges.get(0).length() != count) {
            throw new LeafraftTransportException(tag + ": not one range of " + count + " IDs: " + ranges);
        }
        return ranges.get(0);
    }

    /** One ID of the monotonic {@code tag}, above every ID of it any client received before. */
    public long monotonicId(String tag) {
        return monotonicRange(tag, 1).start();
    }

    public CompletableFuture<Long> monotonicIdAsync(String tag) {
        return async(() -> monotonicId(tag));
    }

    /** {@code count} (1 to 10,000) snowflake IDs in one request (they carry time: never cached). */
    public long[] snowflake(int count) {
        return ids(get("/v1/snowflake?count=" + count));
    }

    public long snowflakeId() {
        return snowflake(1)[0];
    }

    public CompletableFuture<Long> snowflakeIdAsync() {
        return async(this::snowflakeId);
    }

    /** {@code count} long-form time-sequence IDs of {@code namespace} for {@code shard}. */
    public long[] timeseq(String namespace, int shard, int count) {
        return ids(get("/v1/timeseq/" + part(namespace) + "?shard=" + shard + "&count=" + count));
    }

    /** {@code count} string-form IDs ({@code prefix + yyyyMMddHHmmss + sequence + shard}). */
    public List<String> timeseqStrings(String namespace, int shard, int count, String prefix) {
        if (!prefix.matches("[A-Za-z0-9_-]*")) {
            throw new IllegalArgumentException("a prefix is letters, digits, - and _ only, got " + prefix);
        }
        Map<String, Object> answer = get("/v1/timeseq/" + part(namespace) + "?shard=" + shard + "&count=" + count
                + "&format=string&prefix=" + prefix);
        List<String> out = new ArrayList<>();
        for (Object text : (List<?>) answer.get("ids")) {
            out.add(String.valueOf(text));
        }
        return out;
    }

    /** A snowflake ID taken apart by a server with the cluster's layout. */
    public Map<String, Object> decodeSnowflake(long id) {
        return get("/v1/snowflake/decode/" + id);
    }

    /** A long or string-form time-sequence ID taken apart by a server. */
    public Map<String, Object> decodeTimeseq(String namespace, String id) {
        return get("/v1/timeseq/" + part(namespace) + "/decode/" + part(id));
    }

    private static long[] ids(Map<String, Object> answer) {
        List<?> texts = (List<?>) answer.get("ids");
        long[] out = new long[texts.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = id(texts.get(i));
        }
        return out;
    }

    private Map<String, Object> get(String path) {
        checkOpen();
        Transport.Answer answer = transport.send("GET", path, null, Transport.Repeat.SAFE);
        try {
            return Json.object(answer.body());
        } catch (IllegalArgumentException e) {
            throw new LeafraftTransportException(path + ": unexpected answer: " + e.getMessage(), e);
        }
    }

    /** {@code call} on the client's executor; a closed client's future fails with {@link LeafraftClosedException}. */
    <T> CompletableFuture<T> async(Supplier<T> call) {
        if (closed) {
            return CompletableFuture.failedFuture(new LeafraftClosedException());
        }
        try {
            return CompletableFuture.supplyAsync(call, executor);
        } catch (RejectedExecutionException e) {
            return CompletableFuture.failedFuture(new LeafraftClosedException());
        }
    }

    /** After {@link #close()} every call answers {@link LeafraftClosedException}. */
    private void checkOpen() {
        if (closed) {
            throw new LeafraftClosedException();
        }
    }

    // --- what a service needs at start

    /**
     * Creates the segment tag unless it exists; true when this call created it. Sent once (to a
     * second node only when the first refused the connection): when the outcome is unknown the
     * exception says so, and calling again is safe (TAG_EXISTS then answers false). Two identical
     * creates within one millisecond are one create to the server: both answer true (the second
     * changes nothing).
     */
    public boolean createTagIfMissing(String tag, long step) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("tag", tag);
        body.put("step", step);
        return createTagIfMissing(body);
    }

    /** The same with every field of {@code POST /v1/tags} ({@code tag}, {@code step}, {@code max_id}, {@code mode}, ...). */
    public boolean createTagIfMissing(Map<String, Object> tag) {
        return create("/v1/tags", tag, ErrorCode.TAG_EXISTS);
    }

    public CompletableFuture<Boolean> createTagIfMissingAsync(String tag, long step) {
        return async(() -> createTagIfMissing(tag, step));
    }

    /** Creates the time-sequence namespace unless it exists (fields of {@code POST /v1/timeseq}). */
    public boolean createNamespaceIfMissing(Map<String, Object> namespace) {
        return create("/v1/timeseq", namespace, ErrorCode.NAMESPACE_EXISTS);
    }

    private boolean create(String path, Map<String, Object> body, ErrorCode exists) {
        checkOpen();
        try {
            transport.send("POST", path, Json.write(body), Transport.Repeat.NEVER);
            return true;
        } catch (LeafraftApiException e) {
            if (e.code() == exists) {
                return false;
            }
            throw e;
        }
    }

    public Map<String, Object> getTag(String tag) {
        return get("/v1/tags/" + part(tag));
    }

    /** {@code /v1/cluster} from the first node that answers. */
    public Map<String, Object> cluster() {
        return get("/v1/cluster");
    }

    // --- the client itself

    /** The pinned cluster: given, or learnt from the first node that answered (0 until then). */
    public long clusterId() {
        return transport.clusterId.get();
    }

    public List<String> nodes() {
        return transport.nodes();
    }

    public long httpRequests() {
        return transport.requests.get();
    }

    /** Closes every segment handle: their unused IDs are dropped (gaps, never served). */
    @Override
    public void close() {
        closed = true;
        for (Segment segment : segments.values()) {
            segment.close();
        }
        executor.shutdown();
    }
}
