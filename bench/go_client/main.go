// The reference peer of bench/wan.py: Go's net/http calling the upstream directly, one
// request after another, closing each body unread (resp.Body.Close() only). Debian's Go is
// 1.19, whose transport does not drain a closed body: the Go 1.26 behaviour.
// Prints the same JSON line as bench/sequential_fetches.cc.
//
//	go run main.go -url https://... -ca ca.pem -requests 100 -gap_ms 0
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"os"
	"time"
)

func main() {
	url := flag.String("url", "", "the URL to fetch")
	caFile := flag.String("ca", "", "PEM file of the CA that signed the upstream's certificate")
	requests := flag.Int("requests", 100, "sequential requests")
	gapMs := flag.Int("gap_ms", 0, "pause after each request")
	flag.Parse()

	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13},
		// HTTP/1.1 as egressd speaks upstream; the upstream offers only that anyway.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}}

	failed, reused := 0, 0
	var fetchTime time.Duration
	for i := 0; i < *requests; i++ {
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused {
				reused++
			}
		}}
		req, _ := http.NewRequest("GET", *url, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		start := time.Now()
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		} else {
			failed++
			fmt.Fprintln(os.Stderr, err)
		}
		fetchTime += time.Since(start)
		if i+1 < *requests {
			time.Sleep(time.Duration(*gapMs) * time.Millisecond)
		}
	}
	fmt.Printf("{\"requests\": %d, \"failed\": %d, \"reused\": %d, \"fetch_ms\": %.3f}\n",
		*requests, failed, reused, float64(fetchTime.Microseconds())/1000)
	if failed > 0 {
		os.Exit(1)
	}
}
