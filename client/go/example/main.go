// An example of the Go client: fetches URL twice through egressd (the second fetch
// reuses the upstream connection), then streams it and stops after the first bytes.
//
//	go run egress.internal/client/example URL [TARGET]
//
// (see client/go/generate.sh for the GOPATH it runs in).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"egress.internal/client/egress"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: example URL [TARGET]")
		os.Exit(2)
	}
	url, target := os.Args[1], "127.0.0.1:50051"
	if len(os.Args) > 2 {
		target = os.Args[2]
	}
	client, err := egress.New(target, egress.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 1; i <= 2; i++ {
		resp, err := client.Fetch(ctx, url)
		var e *egress.Error
		if errors.As(err, &e) {
			fmt.Fprintf(os.Stderr, "fetch %d: %s (reason %q)\n", i, e.CodeName(), e.Reason)
			os.Exit(1)
		}
		fmt.Printf("fetch %d: HTTP %d, %d bytes, Content-Type %q, reused %v, total %v\n", i,
			resp.StatusCode, len(resp.Body), resp.Header("Content-Type"),
			resp.Connection.Reused, resp.Timing.Total)
	}

	stream, err := client.FetchStream(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	first := make([]byte, 16)
	n, err := io.ReadFull(stream, first)
	stream.Close() // egressd drains the rest of the body
	if err != nil && err != io.ErrUnexpectedEOF {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("stream: HTTP %d, first %d bytes %q\n", stream.StatusCode, n, first[:n])
}
