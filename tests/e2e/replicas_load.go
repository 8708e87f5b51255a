// One long-lived egress.Client (one channel, round_robin and health checking by default)
// fetching URL from two goroutines at once until STOP_FILE exists, then one JSON line:
// {"ok": calls answered HTTP 200, "failed": the others, "errors": the first few}.
// tests/e2e/replicas_test.cc tells which replica answered from each replica's metrics
// (the URL's host names the language).
// Build (in the GOPATH client/go/generate.sh makes), run with GODEBUG=netdns=cgo:
//
//	CGO_ENABLED=1 go build -o BIN replicas_load.go && GODEBUG=netdns=cgo BIN TARGET URL STOP_FILE
//
// netdns=cgo: names resolve through getaddrinfo, which reads the test's /etc/hosts at
// every lookup, as the C-core clients' native resolver does (Go's own resolver keeps
// /etc/hosts for 5 s, a delay a cluster's DNS does not have).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
	_ "unsafe" // go:linkname

	"egress.internal/client/egress"
)

// grpc-go's DNS resolver waits 30 s between resolutions and, in 1.33, has no option to
// lower it (later versions: dns.SetMinResolutionInterval). The other languages' load
// clients set it to 0.5 s through their channel options, so that a GOAWAY from a
// replica's connection age picks up a replica that joined within the test's time; here
// the test sets grpc-go's variable itself.
//
//go:linkname minDNSResRate google.golang.org/grpc/internal/resolver/dns.minDNSResRate
var minDNSResRate time.Duration

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: replicas_load TARGET URL STOP_FILE")
		os.Exit(2)
	}
	target, url, stopFile := os.Args[1], os.Args[2], os.Args[3]
	minDNSResRate = 500 * time.Millisecond
	client, err := egress.New(target, egress.Options{Timeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer client.Close()
	var mu sync.Mutex
	result := struct {
		OK     int      `json:"ok"`
		Failed int      `json:"failed"`
		Errors []string `json:"errors"`
	}{Errors: []string{}}
	loop := func() {
		for {
			if _, err := os.Stat(stopFile); err == nil {
				return
			}
			resp, err := client.Fetch(context.Background(), url, egress.HeadOnly())
			mu.Lock()
			switch {
			case err != nil:
				result.Failed++
				result.Errors = append(result.Errors, time.Now().UTC().Format("15:04:05.000 ")+err.Error())
			case resp.StatusCode != 200:
				result.Failed++
				result.Errors = append(result.Errors, fmt.Sprintf("HTTP %d", resp.StatusCode))
			default:
				result.OK++
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond) // a steady load, not a benchmark
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); loop() }()
	}
	wg.Wait()
	if len(result.Errors) > 5 {
		result.Errors = result.Errors[:5]
	}
	line, _ := json.Marshal(result)
	fmt.Println(string(line))
}
