package io.leafraft.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Against stand-in nodes on loopback (the JDK's HttpServer), answering as leafraft does. */
class LeafraftClientTest {
    /** A stand-in node: /ranges from a counter the fake cluster shares. */
    static final class Fake {
        final HttpServer server;
        volatile String cluster;
        final AtomicLong counter;
        final List<Long> counts = new CopyOnWriteArrayList<>();
        final AtomicInteger ranges = new AtomicInteger();
        final AtomicInteger posts = new AtomicInteger();
        volatile String refuse;
        volatile boolean hang;
        volatile boolean dead;
        volatile String auth;

        Fake(String cluster, AtomicLong counter) throws IOException {
            this.cluster = cluster;
            this.counter = counter;
            server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
            server.setExecutor(Executors.newCachedThreadPool());
            server.createContext("/", this::handle);
            server.start();
        }

        String addr() {
            return "127.0.0.1:" + server.getAddress().getPort();
        }

        void stop() {
            dead = true;
            server.stop(0);
        }

        private void answer(HttpExchange exchange, int status, String body) throws IOException {
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("X-Leafraft-Cluster-Id", cluster);
            exchange.sendResponseHeaders(status, bytes.length);
            exchange.getResponseBody().write(bytes);
            exchange.close();
        }

        private void error(HttpExchange exchange, int status, String code) throws IOException {
            answer(exchange, status, "{\"error\":{\"code\":\"" + code + "\",\"message\":\"fake " + code + "\"}}");
        }

        private void handle(HttpExchange exchange) throws IOException {
            if (dead) {
                exchange.close();
                return;
            }
            auth = exchange.getRequestHeaders().getFirst("Authorization");
            exchange.getRequestBody().readAllBytes();
            if (hang) {
                try {
                    Thread.sleep(3000);
                } catch (InterruptedException e) {
                    return;
                }
            }
            String pinned = exchange.getRequestHeaders().getFirst("X-Leafraft-Cluster-Id");
            if (pinned != null && !pinned.equals(cluster)) {
                error(exchange, 409, "CLUSTER_MISMATCH");
                return;
            }
            String path = exchange.getRequestURI().getPath();
            if (exchange.getRequestMethod().equals("POST")) {
                posts.incrementAndGet();
                answer(exchange, 201, "{\"tag\":\"t\"}");
            } else if (path.equals("/v1/cluster")) {
                answer(exchange, 200, "{\"node_id\":1,\"nodes\":{}}");
            } else if (path.startsWith("/v1/segment/") && path.endsWith("/ranges")) {
                ranges.incrementAndGet();
                if (refuse != null) {
                    error(exchange, refuse.equals("TAG_NOT_FOUND") ? 404 : 503, refuse);
                    return;
                }
                long count = Long.parseLong(exchange.getRequestURI().getQuery().replaceAll(".*count=(\\d+).*", "$1"));
                counts.add(count);
                long start = counter.getAndAdd(count);
                answer(exchange, 200, "{\"tag\":\"t\",\"ranges\":[{\"start\":\"" + start + "\",\"end\":\"" + (start + count) + "\"}]}");
            } else {
                error(exchange, 404, "NOT_FOUND");
            }
        }
    }

    private final List<Fake> fakes = new ArrayList<>();
    private final List<LeafraftClient> clients = new ArrayList<>();

    @AfterEach
    void stop() {
        clients.forEach(LeafraftClient::close);
        fakes.forEach(f -> f.server.stop(0));
    }

    private Fake fake(String cluster, AtomicLong counter) throws IOException {
        Fake fake = new Fake(cluster, counter);
        fakes.add(fake);
        return fake;
    }

    private Fake fake() throws IOException {
        return fake("000000000000000a", new AtomicLong(1));
    }

    private LeafraftClient client(LeafraftClient.Builder builder) {
        LeafraftClient client = builder.discover(false).build();
        clients.add(client);
        return client;
    }

    private static void eventually(String what, BooleanSupplier check) throws InterruptedException {
        for (int i = 0; i < 200; i++) {
            if (check.getAsBoolean()) {
                return;
            }
            Thread.sleep(10);
        }
        fail("never: " + what);
    }

    @Test
    void idsComeFromTheLocalRangeAndTheNextIsFetchedAt10Percent() throws Exception {
        Fake node = fake();
        LeafraftClient client = client(LeafraftClient.builder().nodes(node.addr()).rangeSize(100, 100, Duration.ofMinutes(1)));
        Segment segment = client.segment("t");
        assertEquals(1, segment.nextId());
        segment.nextIds(10);
        eventually("the next range in the background", () -> node.ranges.get() == 2);
        long[] ids = segment.nextIds(189);
        assertEquals(200, ids[ids.length - 1]);
        assertSame(segment, client.segment("t"));
    }

    @Test
    void theRangeSizeFollowsLeafsDynamicStep() throws Exception {
        Fake node = fake();
        LeafraftClient client = client(LeafraftClient.builder().nodes(node.addr()).rangeSize(100, 400, Duration.ofHours(1)));
        client.segment("t").nextIds(100 + 200 + 400 + 10);
        assertEquals(List.of(100L, 200L, 400L, 400L), node.counts.subList(0, 4));
    }

    @Test
    void aFailedNodeIsSkippedAndNoRangeIsServedTwice() throws Exception {
        AtomicLong counter = new AtomicLong(1);
        Fake a = fake("000000000000000a", counter);
        Fake b = fake("000000000000000a", counter);
        LeafraftClient client = client(LeafraftClient.builder().nodes(a.addr(), b.addr()).rangeSize(50, 50, Duration.ofMinutes(1)));
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < 460; i++) {
            if (i == 60) {
                a.refuse = "NOT_READY";
            }
            if (i == 260) {
                a.stop();
            }
            assertTrue(seen.add(client.nextId("t")), "an ID handed out twice");
        }
        assertTrue(b.ranges.get() > 0);
    }

    @Test
    void thePlantedBugServesARangeTwiceAfterAFailover() throws Exception {
        Plant.reuseRangeAfterFailover = true;
        try {
            AtomicLong counter = new AtomicLong(1);
            Fake a = fake("000000000000000a", counter);
            Fake b = fake("000000000000000a", counter);
            LeafraftClient client = client(LeafraftClient.builder().nodes(a.addr(), b.addr()).rangeSize(50, 50, Duration.ofMinutes(1)));
            Set<Long> seen = new HashSet<>();
            boolean duplicate = false;
            for (int i = 0; i < 300; i++) {
                if (i == 60) {
                    a.stop();
                }
                duplicate |= !seen.add(client.nextId("t"));
            }
            assertTrue(duplicate, "the planted switch did not reuse a range");
        } finally {
            Plant.reuseRangeAfterFailover = false;
        }
    }

    @Test
    void aWriteIsNotSentAgainAfterAnUnknownOutcome() throws Exception {
        Fake a = fake();
        Fake b = fake();
        a.hang = true;
        LeafraftClient client = client(LeafraftClient.builder().nodes(a.addr(), b.addr()).timeout(Duration.ofMillis(500)));
        assertThrows(LeafraftException.class, () -> client.createTagIfMissing("t", 10));
        assertEquals(0, b.posts.get());
        String dead = a.addr();
        a.hang = false;
        a.server.stop(0);
        LeafraftClient second = client(LeafraftClient.builder().nodes(dead, b.addr()));
        assertTrue(second.createTagIfMissing("t", 10));
        assertEquals(1, b.posts.get());
    }

    @Test
    void theClusterIsPinnedOnFirstContact() throws Exception {
        AtomicLong counter = new AtomicLong(1);
        Fake a = fake("000000000000000a", counter);
        Fake other = fake("000000000000000b", counter);
        LeafraftClient client = client(LeafraftClient.builder().nodes(a.addr(), other.addr()).rangeSize(10, 10, Duration.ofMinutes(1)));
        client.nextId("t");
        assertEquals(0xaL, client.clusterId());
        a.cluster = "000000000000000c";
        long started = System.nanoTime();
        LeafraftApiException refused = assertThrows(LeafraftApiException.class, () -> client.segment("t").nextIds(20));
        assertEquals(ErrorCode.CLUSTER_MISMATCH, refused.code());
        assertTrue(System.nanoTime() - started < 1_000_000_000L);
        LeafraftClient wrong = client(LeafraftClient.builder().nodes(other.addr()).clusterId("000000000000000a"));
        assertEquals(ErrorCode.CLUSTER_MISMATCH, assertThrows(LeafraftApiException.class, () -> wrong.monotonicId("m")).code());
    }

    @Test
    void serverCodesAreTypedErrorsAndTimeoutsAreBounded() throws Exception {
        Fake node = fake();
        node.refuse = "TAG_NOT_FOUND";
        LeafraftApiException notFound = assertThrows(LeafraftApiException.class,
                () -> client(LeafraftClient.builder().nodes(node.addr())).nextId("nope"));
        assertEquals(ErrorCode.TAG_NOT_FOUND, notFound.code());
        assertEquals(404, notFound.status());
        node.refuse = null;
        node.hang = true;
        LeafraftClient slow = client(LeafraftClient.builder().nodes(node.addr()).timeout(Duration.ofMillis(300)));
        long started = System.nanoTime();
        assertThrows(LeafraftTimeoutException.class, () -> slow.monotonicId("m"));
        assertThrows(LeafraftTimeoutException.class, () -> slow.nextId("t"));
        CompletionException async = assertThrows(CompletionException.class, () -> slow.nextIdAsync("t2").join());
        assertTrue(async.getCause() instanceof LeafraftTimeoutException, async.toString());
        assertTrue(System.nanoTime() - started < 2_000_000_000L);
        assertEquals(27, ErrorCode.values().length);
        assertEquals(ErrorCode.UNKNOWN, new LeafraftApiException(409, "SOMETHING_NEW", "x").code());
        Set<String> transientCodes = new HashSet<>();
        for (ErrorCode code : ErrorCode.values()) {
            if (code.isTransient()) {
                transientCodes.add(code.name());
            }
        }
        assertEquals(Set.of("NOT_READY", "SEGMENTS_NOT_READY", "CLOCK_BACKWARDS", "WORKER_UNAVAILABLE", "NO_LEADER",
                "SECOND_EXHAUSTED", "CLOCK_AHEAD", "CLOCK_UNCHECKED", "MEMBERS_BEHIND"), transientCodes);
    }

    @Test
    void closeDropsTheUnusedIds() throws Exception {
        LeafraftClient client = client(LeafraftClient.builder().nodes(fake().addr()));
        client.nextId("t");
        client.close();
        assertThrows(LeafraftClosedException.class, () -> client.nextId("t"));
        assertThrows(LeafraftClosedException.class, () -> client.monotonicId("m"));
        CompletionException async = assertThrows(CompletionException.class, () -> client.nextIdAsync("t").join());
        assertTrue(async.getCause() instanceof LeafraftClosedException, async.toString());
    }

    @Test
    void monotonicIdsAreNeverCachedAndTheTokenIsSent() throws Exception {
        Fake node = fake();
        LeafraftClient client = client(LeafraftClient.builder().nodes(node.addr()).token("s3cret"));
        long first = client.monotonicId("m");
        long second = client.monotonicIdAsync("m").join();
        assertTrue(second > first);
        assertEquals(2, node.ranges.get());
        assertEquals("Bearer s3cret", node.auth);
    }

    @Test
    void concurrentTakersNeverShareAnId() throws Exception {
        LeafraftClient client = client(LeafraftClient.builder().nodes(fake().addr()).rangeSize(100, 1000, Duration.ofMinutes(1)));
        Set<Long> seen = ConcurrentHashMap.newKeySet();
        AtomicInteger duplicates = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            Thread thread = new Thread(() -> {
                for (long id : client.segment("t").nextIds(5000)) {
                    if (!seen.add(id)) {
                        duplicates.incrementAndGet();
                    }
                }
            });
            thread.start();
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
        assertEquals(0, duplicates.get());
        assertEquals(40_000, seen.size());
    }

    @Test
    void jsonReadsWhatTheServerWrites() {
        Map<String, Object> parsed = Json.object("{\"a\":[1,\"x\\\"y\",true,null,{\"b\":-2.5e1}],\"c\":\"\\u00e9\"}");
        assertEquals("x\"y", ((List<?>) parsed.get("a")).get(1));
        assertEquals("é", parsed.get("c"));
        assertEquals("{\"tag\":\"t\\\"\",\"step\":5}", Json.write(new java.util.LinkedHashMap<>(Map.of("tag", "t\""))) .replace("}", ",\"step\":5}"));
        assertThrows(IllegalArgumentException.class, () -> Json.parse("{\"a\":}"));
        assertFalse(Json.object("{}").containsKey("a"));
    }

    @Test
    void snowflakeIdsComeApartLocally() {
        long id = ((1_700_000_000_000L - 1288834974657L) << 22) | (7L << 12) | 42;
        assertEquals(new SnowflakeLayout.Parts(1_700_000_000_000L, 7, 42), SnowflakeLayout.LEAF.decode(id));
    }
}
