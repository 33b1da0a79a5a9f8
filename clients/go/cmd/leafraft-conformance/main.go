// Command leafraft-conformance is the Go client's program for scripts/clients-test.sh: every
// client has one that takes the same arguments and writes the same lines.
//
//	leafraft-conformance run --nodes A,B,C --tag T --mono M --out FILE --stop FILE
//	    takes IDs of T (segment, local ranges) and M (monotonic) until FILE exists; writes
//	    "s ID ID ..." per batch, "m SENT_US RECEIVED_US ID" per monotonic take, "e CODE" per error
//	leafraft-conformance errors --nodes A,B,C --blackhole H:P
//	    prints "unknown-tag CODE", "cluster-mismatch CODE", "timeout TIMEOUT MS" (typed errors)
//	leafraft-conformance tls --nodes https://H:P --ca FILE --token TOKEN --tag T
//	    prints "tls ok N" and "unauthorized CODE"
//	leafraft-conformance kinds --nodes A,B,C --tag T --ns NS
//	    the start-up and pass-through calls: prints "create-tag true false", "create-namespace
//	    true false", "snowflake ok", "timeseq ok", "timeseq-string ok" (or what went wrong)
//
// LEAFRAFT_CONFORMANCE_PLANT=reuse-range turns on the planted bug (internal/plant), read here
// only: the library itself never reads the environment.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leafraft/leafraft/clients/go/internal/plant"
	"github.com/leafraft/leafraft/clients/go/leafraft"
)

func nowMicros() int64 { return time.Now().UnixNano() / 1000 }

// kind names an error the way every conformance program does: the server's code for a server
// answer, TIMEOUT for the typed timeout, CLOSED, or "untyped:" and the text.
func kind(err error) string {
	if code := leafraft.CodeOf(err); code != "" {
		return string(code)
	}
	if errors.Is(err, leafraft.ErrTimeout) {
		return "TIMEOUT"
	}
	if errors.Is(err, leafraft.ErrClosed) {
		return "CLOSED"
	}
	if err == nil {
		return "none"
	}
	return "untyped:" + strings.ReplaceAll(err.Error(), " ", "_")
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: leafraft-conformance run|errors|tls ...")
		os.Exit(2)
	}
	flags := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	nodes := flags.String("nodes", "", "")
	tag := flags.String("tag", "", "")
	mono := flags.String("mono", "", "")
	out := flags.String("out", "", "")
	stop := flags.String("stop", "", "")
	blackhole := flags.String("blackhole", "", "")
	ca := flags.String("ca", "", "")
	token := flags.String("token", "", "")
	ns := flags.String("ns", "", "")
	_ = flags.Parse(os.Args[2:])
	if os.Getenv("LEAFRAFT_CONFORMANCE_PLANT") == "reuse-range" {
		plant.ReuseRangeAfterFailover.Store(true)
	}
	list := strings.Split(*nodes, ",")
	var err error
	switch os.Args[1] {
	case "run":
		err = run(list, *tag, *mono, *out, *stop)
	case "errors":
		err = typedErrors(list, *blackhole)
	case "tls":
		err = tlsAndToken(list, *ca, *token, *tag)
	case "kinds":
		err = kinds(list, *tag, *ns)
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "leafraft-conformance:", err)
		os.Exit(1)
	}
}

func run(nodes []string, tag, mono, out, stop string) error {
	client, err := leafraft.New(leafraft.Config{
		Nodes: nodes, Timeout: 5 * time.Second, AttemptTimeout: time.Second,
		RangeMin: 100, RangeMax: 1000, RangeLasting: time.Second,
	})
	if err != nil {
		return err
	}
	file, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(file)
	ctx := context.Background()
	segment := client.Segment(tag)
	var segments, monotonic, failures int
	line := make([]byte, 0, 1024)
	for {
		if _, err := os.Stat(stop); err == nil {
			break
		}
		line = append(line[:0], 's')
		for i := 0; i < 50; i++ {
			id, err := segment.NextID(ctx)
			if err != nil {
				failures++
				fmt.Fprintf(w, "e %s\n", kind(err))
				break
			}
			line = append(line, ' ')
			line = strconv.AppendInt(line, id, 10)
			segments++
		}
		w.Write(append(line, '\n'))
		sent := nowMicros()
		id, err := client.MonotonicID(ctx, mono)
		received := nowMicros() + 1
		if err != nil {
			failures++
			fmt.Fprintf(w, "e %s\n", kind(err))
		} else {
			monotonic++
			fmt.Fprintf(w, "m %d %d %d\n", sent, received, id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	client.Close()
	if err := w.Flush(); err != nil {
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	fmt.Printf("go: segment=%d monotonic=%d errors=%d requests=%d\n", segments, monotonic, failures, client.HTTPRequests())
	return nil
}

func typedErrors(nodes []string, blackhole string) error {
	ctx := context.Background()
	client, err := leafraft.New(leafraft.Config{Nodes: nodes, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	_, err = client.NextID(ctx, "conformance-no-such-tag")
	fmt.Println("unknown-tag", kind(err))
	client.Close()

	wrong, err := leafraft.New(leafraft.Config{Nodes: nodes, Timeout: 5 * time.Second, ClusterID: 0x0123456789abcdef})
	if err != nil {
		return err
	}
	_, err = wrong.NextID(ctx, "conformance-no-such-tag")
	fmt.Println("cluster-mismatch", kind(err))
	wrong.Close()

	hole, err := leafraft.New(leafraft.Config{Nodes: []string{blackhole}, Timeout: time.Second})
	if err != nil {
		return err
	}
	started := time.Now()
	_, err = hole.NextID(ctx, "anything")
	fmt.Println("timeout", kind(err), time.Since(started).Milliseconds())
	hole.Close()
	return nil
}

func tlsAndToken(nodes []string, ca, token, tag string) error {
	ctx := context.Background()
	client, err := leafraft.New(leafraft.Config{Nodes: nodes, CAFile: ca, Token: token, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	ids, err := client.Segment(tag).NextIDs(ctx, 10)
	if err != nil {
		fmt.Println("tls", kind(err))
	} else {
		fmt.Println("tls ok", len(ids))
	}
	client.Close()
	anonymous, err := leafraft.New(leafraft.Config{Nodes: nodes, CAFile: ca, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	_, err = anonymous.NextID(ctx, tag)
	fmt.Println("unauthorized", kind(err))
	anonymous.Close()
	return nil
}

func kinds(nodes []string, tag, ns string) error {
	ctx := context.Background()
	client, err := leafraft.New(leafraft.Config{Nodes: nodes, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer client.Close()
	// Apart by more than a millisecond: two identical creates within one are answered alike.
	first, err1 := client.CreateTagIfMissing(ctx, leafraft.NewTag{Tag: tag, Step: 100})
	time.Sleep(10 * time.Millisecond)
	second, err2 := client.CreateTagIfMissing(ctx, leafraft.NewTag{Tag: tag, Step: 100})
	fmt.Println("create-tag", first, second, kind(err1), kind(err2))
	first, err1 = client.CreateNamespaceIfMissing(ctx, leafraft.NewNamespace{Namespace: ns})
	time.Sleep(10 * time.Millisecond)
	second, err2 = client.CreateNamespaceIfMissing(ctx, leafraft.NewNamespace{Namespace: ns})
	fmt.Println("create-namespace", first, second, kind(err1), kind(err2))

	ids, err := client.Snowflake(ctx, 3)
	switch {
	case err != nil:
		fmt.Println("snowflake", kind(err))
	case len(ids) != 3 || !(ids[0] < ids[1] && ids[1] < ids[2]):
		fmt.Println("snowflake not-increasing", ids)
	default:
		decoded, err := client.DecodeSnowflake(ctx, ids[0])
		local := leafraft.LeafLayout.Decode(ids[0])
		if err != nil || decoded.TimestampMs != local.TimestampMs || decoded.WorkerID != local.Worker || decoded.Sequence != local.Sequence {
			fmt.Println("snowflake decode-differs", kind(err), decoded, local)
		} else {
			fmt.Println("snowflake ok")
		}
	}

	longs, err := client.Timeseq(ctx, ns, 3, 3)
	switch {
	case err != nil:
		fmt.Println("timeseq", kind(err))
	case len(longs) != 3 || !(longs[0] < longs[1] && longs[1] < longs[2]):
		fmt.Println("timeseq not-increasing", longs)
	default:
		decoded, err := client.DecodeTimeseq(ctx, ns, strconv.FormatInt(longs[0], 10))
		if err != nil || decoded.Shard != 3 {
			fmt.Println("timeseq decode", kind(err), decoded)
		} else {
			fmt.Println("timeseq ok")
		}
	}

	texts, err := client.TimeseqStrings(ctx, ns, 3, 2, "AB")
	switch {
	case err != nil:
		fmt.Println("timeseq-string", kind(err))
	case len(texts) != 2 || !strings.HasPrefix(texts[0], "AB") || texts[0] == texts[1]:
		fmt.Println("timeseq-string unexpected", texts)
	default:
		decoded, err := client.DecodeTimeseq(ctx, ns, texts[0])
		if err != nil || decoded.Shard != 3 {
			fmt.Println("timeseq-string decode", kind(err), decoded)
		} else {
			fmt.Println("timeseq-string ok")
		}
	}
	return nil
}
