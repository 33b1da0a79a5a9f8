package io.leafraft.client;

import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * The Java client's local path for scripts/bench-clients.sh: {@link Segment#nextId()} on a warm
 * handle against a bare {@link AtomicLong#getAndIncrement()}, same run, interleaved rounds,
 * median; and the IDs/s one thread and 8 sustain, refills from a real node included.
 *
 * <pre>java -cp ... io.leafraft.client.ClientBench --nodes H:P --tag T</pre>
 */
public final class ClientBench {
    private static final int ROUNDS = 9;
    private static final int N = 20_000_000;
    private static final int CHUNK = 2_000;
    static volatile long sink;

    private ClientBench() {}

    static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }

    static double sustained(int workers, LongSupplier take) throws InterruptedException {
        AtomicLong total = new AtomicLong();
        long deadline = System.nanoTime() + 2_000_000_000L;
        Thread[] threads = new Thread[workers];
        long started = System.nanoTime();
        for (int w = 0; w < workers; w++) {
            threads[w] = new Thread(() -> {
                long mine = 0;
                long local = 0;
                while (System.nanoTime() < deadline) {
                    for (int i = 0; i < 1000; i++) {
                        local += take.getAsLong();
                    }
                    mine += 1000;
                }
                total.addAndGet(mine);
                sink += local;
            });
            threads[w].start();
        }
        for (Thread thread : threads) {
            thread.join();
        }
        return total.get() / ((System.nanoTime() - started) / 1e9);
    }

    public static void main(String[] argv) throws Exception {
        String nodes = argv[1];
        String tag = argv[3];
        try (LeafraftClient client = LeafraftClient.builder().nodes(nodes).discover(false)
                .rangeSize(10_000, 10_000, Duration.ofSeconds(60)).build()) {
            Segment segment = client.segment(tag);
            segment.nextIds(2_000);
            AtomicLong counter = new AtomicLong();
            double[] baseline = new double[ROUNDS];
            double[] warm = new double[ROUNDS];
            for (int r = 0; r < ROUNDS; r++) {
                long local = 0;
                long started = System.nanoTime();
                for (int i = 0; i < N; i++) {
                    local += counter.getAndIncrement();
                }
                baseline[r] = (System.nanoTime() - started) / (double) N;
                // Warm: timed stretches stay inside the current range (a switch is not timed).
                long timed = 0;
                long spent = 0;
                while (timed < N / 4) {
                    if (segment.available() > CHUNK + 1) {
                        long begin = System.nanoTime();
                        for (int i = 0; i < CHUNK; i++) {
                            local += segment.nextId();
                        }
                        spent += System.nanoTime() - begin;
                        timed += CHUNK;
                    } else {
                        local += segment.nextId();
                    }
                }
                warm[r] = spent / (double) timed;
                sink += local;
            }
            double one = sustained(1, segment::nextId);
            double eight = sustained(8, segment::nextId);
            double atomicEight = sustained(8, counter::getAndIncrement);
            double b = median(baseline);
            double w = median(warm);
            System.out.printf("java baseline_ns=%.2f next_id_ns=%.2f ratio=%.2f one_thread_ids_s=%.0f eight_threads_ids_s=%.0f atomic_eight_threads_ids_s=%.0f fetches=%d%n",
                    b, w, w / b, one, eight, atomicEight, segment.fetches());
        }
    }
}
