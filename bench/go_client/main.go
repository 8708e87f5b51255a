// The reference peer of bench/wan.py: Go's net/http calling the upstream directly, one
// request after another, closing each body unread (resp.Body.Close() only) unless
// -read_body. Debian's Go is 1.19, whose transport does not drain a closed body: the Go
// 1.26 behaviour.
// Prints the same JSON line as bench/sequential_fetches.cc, and exits 1 the same way when
// a request failed.
//
//	go run main.go -url https://... -ca ca.pem -requests 100 -gap_ms 0
//	go run main.go -url https://... -ca ca.pem -method POST -body x -gap_ms 1900,2000
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	url := flag.String("url", "", "the URL to fetch")
	caFile := flag.String("ca", "", "PEM file of the CA that signed the upstream's certificate")
	method := flag.String("method", "GET", "the request's method")
	body := flag.String("body", "", "the request's body")
	requests := flag.Int("requests", 100, "sequential requests")
	readBody := flag.Bool("read_body", false, "read each body to its end before closing it")
	gapList := flag.String("gap_ms", "0",
		"pause after each request, in ms; a list (1900,2000) is cycled through")
	flag.Parse()

	var gaps []time.Duration
	for _, text := range strings.Split(*gapList, ",") {
		ms, err := strconv.Atoi(text)
		if err != nil || ms < 0 {
			fmt.Fprintf(os.Stderr, "-gap_ms: %s is not a number of milliseconds\n", text)
			os.Exit(2)
		}
		gaps = append(gaps, time.Duration(ms)*time.Millisecond)
	}

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
		req, _ := http.NewRequest(*method, *url, strings.NewReader(*body))
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		start := time.Now()
		resp, err := client.Do(req)
		if err == nil {
			if *readBody {
				_, err = io.Copy(io.Discard, resp.Body)
			}
			resp.Body.Close()
		}
		if err != nil {
			failed++
			fmt.Fprintln(os.Stderr, err)
		}
		fetchTime += time.Since(start)
		if i+1 < *requests {
			time.Sleep(gaps[i%len(gaps)])
		}
	}
	fmt.Printf("{\"requests\": %d, \"failed\": %d, \"reused\": %d, \"fetch_ms\": %.3f}\n",
		*requests, failed, reused, float64(fetchTime.Microseconds())/1000)
	if failed > 0 {
		os.Exit(1)
	}
}
