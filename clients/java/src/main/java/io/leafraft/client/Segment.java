package io.leafraft.client;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A handle on one tag's IDs, served from a local double buffer as Leaf's server does it; safe to
 * share between threads. {@link LeafraftClient#segment(String)} answers the same handle for the
 * same tag.
 *
 * <p>Taking an ID is one {@code getAndIncrement} on the current range: no lock, no I/O. When 10 %
 * of it is used, one background task fetches the next range ({@code GET
 * /v1/segment/{tag}/ranges?count=N}, sized by Leaf's dynamic step); when the current range is
 * used up, takers switch to it. A taker that finds both used up waits for the fetch, at most the
 * client's timeout, then gets the fetch's error or a {@link LeafraftTimeoutException}.
 *
 * <p>Invariants: every ID handed out lies in a range the server answered to this handle, once;
 * ranges are used in the order they came, each once, whichever node answered them (a failover
 * never makes a range be served again); after {@link #close()} the unused IDs are dropped.
 */
public final class Segment implements AutoCloseable {
    /**
     * One installed range; {@code next} is the position the next taker gets, advanced with one
     * atomic add through {@link #NEXT} (a field of the range itself: no second object to load).
     */
    private static final class Span {
        @SuppressWarnings("unused") // read and written through NEXT
        volatile long next;
        final long end;
        final long loadAt;

        Span(long start, long end) {
            this.next = start;
            this.end = end;
            this.loadAt = start + (end - start) / 10;
        }

        long take() {
            return (long) NEXT.getAndAdd(this, 1L);
        }
    }

    private static final VarHandle NEXT;

    static {
        try {
            NEXT = MethodHandles.lookup().findVarHandle(Span.class, "next", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static final Span EMPTY_RANGE = null;

    private final LeafraftClient client;
    private final String tag;
    private volatile Span current = new Span(0, 0);

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition loaded = lock.newCondition();
    private Span next;
    private final Deque<IdRange> queued = new ArrayDeque<>();
    private boolean loading;
    private long loadsDone;
    private LeafraftException lastError;
    private long lastErrorAt;
    private boolean closed;
    private long lastCount;
    private long lastFetchNanos;
    private boolean fetchedOnce;
    private String lastNode;
    private IdRange lastRange;
    private final AtomicLong fetches = new AtomicLong();
    /** Set once the tag's /ranges answered MODE_MISMATCH (a scrambled tag): lists since. */
    private final java.util.concurrent.atomic.AtomicBoolean listed = new java.util.concurrent.atomic.AtomicBoolean();

    Segment(LeafraftClient client, String tag) {
        this.client = client;
        this.tag = tag;
    }

    public String tag() {
        return tag;
    }

    /**
     * One ID: without waiting while the buffer holds IDs (lock-free), else waiting for the next
     * range at most the client's timeout.
     *
     * @throws LeafraftApiException the server's error for the fetch (e.g. TAG_NOT_FOUND)
     * @throws LeafraftTimeoutException no range came within the timeout
     * @throws LeafraftClosedException the handle or client was closed
     */
    public long nextId() {
        Span span = current;
        long id = span.take();
        if (id < span.end) {
            if (id == span.loadAt) {
                startLoad();
            }
            return id;
        }
        return slow();
    }

    /** One ID, completed at once while the buffer holds IDs, else on the client's executor. */
    public CompletableFuture<Long> nextIdAsync() {
        Span span = current;
        long id = span.take();
        if (id < span.end) {
            if (id == span.loadAt) {
                startLoad();
            }
            return CompletableFuture.completedFuture(id);
        }
        return client.async(this::slow);
    }

    /** {@code count} IDs, in the order handed out. */
    public long[] nextIds(int count) {
        long[] ids = new long[count];
        for (int i = 0; i < count; i++) {
            ids[i] = nextId();
        }
        return ids;
    }

    /** Starts fetching the first range now, so that the first {@link #nextId()} does not wait. */
    public void preload() {
        startLoad();
    }

    /** Stops handing out IDs; the IDs left in the buffer are dropped (a gap, never served). */
    @Override
    public void close() {
        lock.lock();
        try {
            closed = true;
            current = new Span(0, 0);
            next = EMPTY_RANGE;
            queued.clear();
            loaded.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** How many range requests this handle made. */
    public long fetches() {
        return fetches.get();
    }

    /** IDs left in the current range (for benchmarks and tests); takes none. */
    public long available() {
        Span span = current;
        return Math.max(0, span.end - span.next);
    }

    private boolean switchLocked() {
        if (closed || next == null) {
            return false;
        }
        current = next;
        next = null;
        IdRange queuedRange = queued.pollFirst();
        if (queuedRange != null) {
            next = new Span(queuedRange.start(), queuedRange.end());
        }
        return true;
    }

    private long slow() {
        long started = System.nanoTime();
        long deadline = started + client.timeout().toNanos();
        lock.lock();
        try {
            long arrived = loadsDone;
            while (true) {
                if (closed) {
                    throw new LeafraftClosedException();
                }
                Span span = current;
                long id = span.take();
                if (id < span.end) {
                    if (id == span.loadAt) {
                        startLoadLocked();
                    }
                    return id;
                }
                if (switchLocked()) {
                    continue;
                }
                // Nothing ready: the load that ends after this taker arrived decides.
                if (lastError != null && lastErrorAt > arrived && !loading) {
                    throw lastError;
                }
                startLoadLocked();
                if (next != null) {
                    continue;
                }
                long remaining = deadline - System.nanoTime();
                if (remaining <= 0) {
                    throw new LeafraftTimeoutException(Duration.ofNanos(System.nanoTime() - started),
                            lastError == null ? "the next range did not come" : lastError.getMessage());
                }
                try {
                    loaded.awaitNanos(remaining);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new LeafraftTransportException("interrupted while waiting for a range", e);
                }
            }
        } finally {
            lock.unlock();
        }
    }

    private void startLoad() {
        lock.lock();
        try {
            startLoadLocked();
        } finally {
            lock.unlock();
        }
    }

    private void startLoadLocked() {
        if (loading || next != null || closed) {
            return;
        }
        IdRange queuedRange = queued.pollFirst();
        if (queuedRange != null) {
            next = new Span(queuedRange.start(), queuedRange.end());
            return;
        }
        loading = true;
        try {
            client.executor().execute(this::load);
        } catch (RuntimeException e) {
            loading = false;
            throw new LeafraftClosedException();
        }
    }

    /** Leaf's dynamic step: lasted under the configured duration, double; over twice it, half. */
    private long nextCountLocked() {
        long min = client.rangeMin();
        long max = client.rangeMax();
        if (!fetchedOnce) {
            return min;
        }
        long step = Math.max(lastCount, min);
        long lasted = System.nanoTime() - lastFetchNanos;
        long lasting = client.rangeLasting().toNanos();
        if (lasted < lasting) {
            if (step * 2 <= max) {
                step *= 2;
            }
        } else if (lasted >= 2 * lasting) {
            step /= 2;
        }
        return Math.min(Math.max(step, min), max);
    }

    private void load() {
        long count;
        lock.lock();
        try {
            count = nextCountLocked();
        } finally {
            lock.unlock();
        }
        fetches.incrementAndGet();
        List<IdRange> ranges = null;
        String node = null;
        LeafraftException error = null;
        try {
            LeafraftClient.Ranges answer = client.fetchSegmentRanges(tag, count, listed);
            ranges = new ArrayList<>(answer.ranges());
            node = answer.node();
            if (ranges.isEmpty()) {
                error = new LeafraftTransportException("an empty range answer");
            }
        } catch (LeafraftException e) {
            error = e;
        } catch (RuntimeException e) {
            error = new LeafraftTransportException("range fetch failed: " + e, e);
        }
        lock.lock();
        try {
            loading = false;
            loadsDone++;
            if (error != null) {
                lastError = error;
                lastErrorAt = loadsDone;
            } else if (!closed) {
                lastError = null;
                lastCount = count;
                lastFetchNanos = System.nanoTime();
                fetchedOnce = true;
                if (Plant.reuseRangeAfterFailover && lastNode != null && !lastNode.equals(node) && lastRange != null) {
                    // The planted bug (conformance suite only): serve the previous range once more.
                    ranges.add(0, lastRange);
                }
                lastNode = node;
                lastRange = ranges.get(ranges.size() - 1);
                next = new Span(ranges.get(0).start(), ranges.get(0).end());
                queued.addAll(ranges.subList(1, ranges.size()));
            }
            loaded.signalAll();
        } finally {
            lock.unlock();
        }
    }

}
