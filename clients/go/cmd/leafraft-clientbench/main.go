// Command leafraft-clientbench measures the Go client's local path for scripts/bench-clients.sh:
// Segment.NextID on a warm handle against a bare atomic.Int64.Add (same run, interleaved rounds,
// median), and the IDs/s one goroutine and 8 sustain with refills from a real node included.
//
//	leafraft-clientbench --nodes H:P --tag T
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafraft/leafraft/clients/go/leafraft"
)

const (
	rounds = 9
	n      = 20_000_000
	chunk  = 2_000
)

var sink int64

func median(values []float64) float64 {
	sort.Float64s(values)
	return values[len(values)/2]
}

func main() {
	nodes := flag.String("nodes", "", "")
	tag := flag.String("tag", "", "")
	flag.Parse()
	client, err := leafraft.New(leafraft.Config{Nodes: []string{*nodes}, NoDiscovery: true, RangeMin: 10_000, RangeMax: 10_000})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer client.Close()
	ctx := context.Background()
	segment := client.Segment(*tag)
	if _, err := segment.NextIDs(ctx, 2_000); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var counter atomic.Int64
	var baseline, warm []float64
	for r := 0; r < rounds; r++ {
		started := time.Now()
		for i := 0; i < n; i++ {
			sink += counter.Add(1)
		}
		baseline = append(baseline, float64(time.Since(started).Nanoseconds())/n)
		// Warm: timed stretches stay inside the current range (a switch, which may wait for the
		// next range's HTTP, is not timed).
		var timed int64
		var spent time.Duration
		for timed < n/4 {
			if segment.Available() > chunk+1 {
				started := time.Now()
				for i := 0; i < chunk; i++ {
					id, err := segment.NextID(ctx)
					if err != nil {
						panic(err)
					}
					sink += id
				}
				spent += time.Since(started)
				timed += chunk
			} else if _, err := segment.NextID(ctx); err != nil {
				panic(err)
			}
		}
		warm = append(warm, float64(spent.Nanoseconds())/float64(timed))
	}
	sustained := func(workers int, take func() int64) float64 {
		var total atomic.Int64
		var wg sync.WaitGroup
		deadline := time.Now().Add(2 * time.Second)
		started := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine, local int64
				for time.Now().Before(deadline) {
					for i := 0; i < 1000; i++ {
						local += take()
					}
					mine += 1000
				}
				total.Add(mine)
				atomic.AddInt64(&sink, local)
			}()
		}
		wg.Wait()
		return float64(total.Load()) / time.Since(started).Seconds()
	}
	takeID := func() int64 {
		id, err := segment.NextID(ctx)
		if err != nil {
			panic(err)
		}
		return id
	}
	one := sustained(1, takeID)
	eight := sustained(8, takeID)
	atomicEight := sustained(8, func() int64 { return counter.Add(1) })
	b, w := median(baseline), median(warm)
	fmt.Printf("go baseline_ns=%.2f next_id_ns=%.2f ratio=%.2f one_thread_ids_s=%.0f eight_threads_ids_s=%.0f atomic_eight_threads_ids_s=%.0f fetches=%d\n",
		b, w, w/b, one, eight, atomicEight, segment.Fetches())
}
