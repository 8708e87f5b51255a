// Calls egressd through client/go twice for URL, then once for a malformed URL, once for
// LARGE_URL (a body over gRPC's default message limit) and once for DENIED_URL (which
// egressd's policy denies); prints one JSON object per call for
// tests/e2e/clients_test.cc to check (client/go's own tests, run there too, cover
// FetchStream against the same egressd).
// Usage (in the GOPATH client/go/generate.sh makes):
//
//	go run check_go.go TARGET URL LARGE_URL DENIED_URL
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"egress.internal/client/egress"
)

func print(object map[string]interface{}) {
	line, _ := json.Marshal(object)
	fmt.Println(string(line))
}

// failure is an error as the test reads it: the code, the message, the ErrorInfo.
func failure(err error) map[string]interface{} {
	var e *egress.Error
	if !errors.As(err, &e) {
		return map[string]interface{}{"error": "not an *egress.Error: " + err.Error()}
	}
	return map[string]interface{}{"error": e.CodeName(), "message": e.Message, "reason": e.Reason,
		"domain": e.Domain, "rule": e.Metadata["rule"], "host": e.Metadata["host"]}
}

func main() {
	target, url, largeURL, deniedURL := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	client, err := egress.New(target, egress.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for i := 0; i < 2; i++ {
		r, err := client.Fetch(ctx, url)
		if err != nil {
			print(failure(err))
			continue
		}
		print(map[string]interface{}{"status": r.StatusCode, "content_length": r.Header("Content-Length"),
			"body": base64.StdEncoding.EncodeToString(r.Body), "reused": r.Connection.Reused,
			"connection_id": strconv.FormatUint(r.Connection.ID, 10)})
	}
	if _, err := client.Fetch(ctx, "not a url"); err != nil {
		print(failure(err))
	} else {
		print(map[string]interface{}{"error": "none"})
	}
	// Over egressd's default max_body_bytes: the client's receive limit must allow it.
	if r, err := client.Fetch(ctx, largeURL, egress.MaxBodyBytes(8<<20)); err != nil {
		print(failure(err))
	} else {
		print(map[string]interface{}{"large_status": r.StatusCode, "large_bytes": strconv.Itoa(len(r.Body))})
	}
	if _, err := client.Fetch(ctx, deniedURL); err != nil {
		print(failure(err))
	} else {
		print(map[string]interface{}{"error": "none"})
	}
}
