package io.leafraft.client;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The Java client's program for scripts/clients-test.sh (same arguments and lines as every
 * client's; the protocol is in clients/go/cmd/leafraft-conformance). Compiled into the client's
 * package, not into the library's jar, so that it alone can reach the planted switch
 * ({@link Plant}); LEAFRAFT_CONFORMANCE_PLANT=reuse-range turns it on, read here only.
 */
public final class Conformance {
    private Conformance() {}

    static long nowMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    static String kind(Throwable error) {
        if (error instanceof LeafraftApiException api) {
            return api.rawCode();
        }
        if (error instanceof LeafraftTimeoutException) {
            return "TIMEOUT";
        }
        if (error instanceof LeafraftClosedException) {
            return "CLOSED";
        }
        return error == null ? "none" : "untyped:" + String.valueOf(error).replace(' ', '_');
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            System.err.println("usage: Conformance run|errors|tls --flag value ...");
            System.exit(2);
        }
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        if ("reuse-range".equals(System.getenv("LEAFRAFT_CONFORMANCE_PLANT"))) {
            Plant.reuseRangeAfterFailover = true;
        }
        List<String> nodes = Arrays.asList(args.getOrDefault("nodes", "").split(","));
        switch (argv[0]) {
            case "run" -> run(nodes, args.get("tag"), args.get("mono"), Path.of(args.get("out")), Path.of(args.get("stop")));
            case "errors" -> errors(nodes, args.get("blackhole"));
            case "tls" -> tls(nodes, Path.of(args.get("ca")), args.get("token"), args.get("tag"));
            case "kinds" -> kinds(nodes, args.get("tag"), args.get("ns"));
            default -> {
                System.err.println("unknown mode " + argv[0]);
                System.exit(2);
            }
        }
        System.exit(0);
    }

    static void run(List<String> nodes, String tag, String mono, Path out, Path stop) throws IOException, InterruptedException {
        LeafraftClient client = LeafraftClient.builder().nodes(nodes).timeout(Duration.ofSeconds(5))
                .attemptTimeout(Duration.ofSeconds(1)).rangeSize(100, 1000, Duration.ofSeconds(1)).build();
        Segment segment = client.segment(tag);
        long segments = 0;
        long monotonic = 0;
        long failures = 0;
        try (BufferedWriter writer = Files.newBufferedWriter(out)) {
            StringBuilder line = new StringBuilder();
            while (!Files.exists(stop)) {
                line.setLength(0);
                line.append('s');
                for (int i = 0; i < 50; i++) {
                    try {
                        line.append(' ').append(segment.nextId());
                        segments++;
                    } catch (LeafraftException e) {
                        failures++;
                        writer.write("e " + kind(e) + "\n");
                        break;
                    }
                }
                writer.write(line.append('\n').toString());
                long sent = nowMicros();
                try {
                    long id = client.monotonicId(mono);
                    writer.write("m " + sent + " " + (nowMicros() + 1) + " " + id + "\n");
                    monotonic++;
                } catch (LeafraftException e) {
                    failures++;
                    writer.write("e " + kind(e) + "\n");
                }
                Thread.sleep(5);
            }
        }
        client.close();
        System.out.println("java: segment=" + segments + " monotonic=" + monotonic + " errors=" + failures
                + " requests=" + client.httpRequests());
    }

    static void errors(List<String> nodes, String blackhole) {
        try (LeafraftClient client = LeafraftClient.builder().nodes(nodes).timeout(Duration.ofSeconds(5)).build()) {
            client.nextId("conformance-no-such-tag");
            System.out.println("unknown-tag none");
        } catch (LeafraftException e) {
            System.out.println("unknown-tag " + kind(e));
        }
        try (LeafraftClient wrong = LeafraftClient.builder().nodes(nodes).timeout(Duration.ofSeconds(5))
                .clusterId(0x0123456789abcdefL).build()) {
            wrong.nextId("conformance-no-such-tag");
            System.out.println("cluster-mismatch none");
        } catch (LeafraftException e) {
            System.out.println("cluster-mismatch " + kind(e));
        }
        long started = System.nanoTime();
        try (LeafraftClient hole = LeafraftClient.builder().nodes(blackhole).timeout(Duration.ofSeconds(1)).build()) {
            hole.nextId("anything");
            System.out.println("timeout none");
        } catch (LeafraftException e) {
            System.out.println("timeout " + kind(e) + " " + (System.nanoTime() - started) / 1_000_000);
        }
    }

    /** "true"/"false" and the error's kind, of a create-if-missing call. */
    static String created(java.util.function.BooleanSupplier create) {
        try {
            return create.getAsBoolean() + " none";
        } catch (LeafraftException e) {
            return "false " + kind(e);
        }
    }

    static void kinds(List<String> nodes, String tag, String ns) throws InterruptedException {
        try (LeafraftClient client = LeafraftClient.builder().nodes(nodes).timeout(Duration.ofSeconds(5)).build()) {
            // Apart by more than a millisecond: two identical creates within one are answered alike.
            String[] first = created(() -> client.createTagIfMissing(tag, 100)).split(" ");
            Thread.sleep(10);
            String[] second = created(() -> client.createTagIfMissing(tag, 100)).split(" ");
            System.out.println("create-tag " + first[0] + " " + second[0] + " " + first[1] + " " + second[1]);
            Map<String, Object> namespace = Map.of("namespace", ns);
            first = created(() -> client.createNamespaceIfMissing(namespace)).split(" ");
            Thread.sleep(10);
            second = created(() -> client.createNamespaceIfMissing(namespace)).split(" ");
            System.out.println("create-namespace " + first[0] + " " + second[0] + " " + first[1] + " " + second[1]);
            try {
                long[] ids = client.snowflake(3);
                if (!(ids.length == 3 && ids[0] < ids[1] && ids[1] < ids[2])) {
                    System.out.println("snowflake not-increasing " + Arrays.toString(ids));
                } else {
                    Map<String, Object> decoded = client.decodeSnowflake(ids[0]);
                    SnowflakeLayout.Parts local = SnowflakeLayout.LEAF.decode(ids[0]);
                    boolean same = ((Number) decoded.get("timestamp_ms")).longValue() == local.timestampMs()
                            && ((Number) decoded.get("worker_id")).longValue() == local.worker()
                            && ((Number) decoded.get("sequence")).longValue() == local.sequence();
                    System.out.println(same ? "snowflake ok" : "snowflake decode-differs " + decoded + " " + local);
                }
            } catch (LeafraftException e) {
                System.out.println("snowflake " + kind(e));
            }
            try {
                long[] ids = client.timeseq(ns, 3, 3);
                if (!(ids.length == 3 && ids[0] < ids[1] && ids[1] < ids[2])) {
                    System.out.println("timeseq not-increasing " + Arrays.toString(ids));
                } else {
                    Map<String, Object> decoded = client.decodeTimeseq(ns, Long.toString(ids[0]));
                    System.out.println(((Number) decoded.get("shard")).longValue() == 3 ? "timeseq ok" : "timeseq decode " + decoded);
                }
            } catch (LeafraftException e) {
                System.out.println("timeseq " + kind(e));
            }
            try {
                List<String> texts = client.timeseqStrings(ns, 3, 2, "AB");
                if (!(texts.size() == 2 && texts.get(0).startsWith("AB") && !texts.get(0).equals(texts.get(1)))) {
                    System.out.println("timeseq-string unexpected " + texts);
                } else {
                    Map<String, Object> decoded = client.decodeTimeseq(ns, texts.get(0));
                    System.out.println(((Number) decoded.get("shard")).longValue() == 3 ? "timeseq-string ok" : "timeseq-string decode " + decoded);
                }
            } catch (LeafraftException e) {
                System.out.println("timeseq-string " + kind(e));
            }
        }
    }

    static void tls(List<String> nodes, Path ca, String token, String tag) {
        try (LeafraftClient client = LeafraftClient.builder().nodes(nodes).caFile(ca).token(token)
                .timeout(Duration.ofSeconds(5)).build()) {
            System.out.println("tls ok " + client.segment(tag).nextIds(10).length);
        } catch (LeafraftException e) {
            System.out.println("tls " + kind(e));
        }
        try (LeafraftClient anonymous = LeafraftClient.builder().nodes(nodes).caFile(ca).timeout(Duration.ofSeconds(5)).build()) {
            anonymous.nextId(tag);
            System.out.println("unauthorized none");
        } catch (LeafraftException e) {
            System.out.println("unauthorized " + kind(e));
        }
    }
}
