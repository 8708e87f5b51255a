// Package egress is a Go client for egressd: Fetch and FetchStream on the Egress
// service over the stubs generated from proto/egress/v1/egress.proto (package
// egress.internal/client/egress/egressv1, made by client/go/goproxy.py for module mode and
// by client/go/generate.sh for a GOPATH).
//
//	client, err := egress.New("127.0.0.1:50051", egress.Options{})
//	if err != nil { ... }
//	defer client.Close()
//	resp, err := client.Fetch(ctx, "https://api.example.com/v1/items", egress.HeadOnly())
//	var e *egress.Error
//	if errors.As(err, &e) && e.Reason == "POLICY_DENIED" { ... }
//	fmt.Println(resp.StatusCode, resp.Header("Content-Type"), resp.Connection.Reused)
//
// The context's deadline and cancellation travel to egressd; a context without a
// deadline gets Options.Timeout. An HTTP error status (404, 503) is a Response; an
// error is always an *Error with the gRPC code egressd (or gRPC) gave.
package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/ioutil"
	"time"
	"unicode/utf8"

	"egress.internal/client/egress/egressv1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	// Registers grpc-go's client-side health checking, which the default service
	// config's healthCheckConfig turns on (without this import grpc-go ignores it).
	_ "google.golang.org/grpc/health"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TLS to one of egressd's listeners (--grpc_tls_* or --admin_tls_*).
type TLS struct {
	CAFile     string // PEM roots egressd's certificate must chain to; "": the system's
	CertFile   string // PEM client certificate and key, for mTLS (both or neither)
	KeyFile    string
	ServerName string // the name egressd's certificate carries when it is not the target's host
}

// Options of a Client; the zero value is plaintext with a 30 s default deadline.
type Options struct {
	// The deadline of a call whose context has none; 0 means 30 s.
	Timeout time.Duration
	// TLS to the target; nil is plaintext.
	TLS *TLS
	// Metadata sent on every call, e.g. {"x-egress-caller": "billing"} when egressd
	// names callers by policy.caller_header. Keys in lower case.
	Metadata map[string]string
	// More dial options, appended to the client's own. A grpc.WithDefaultServiceConfig
	// among them replaces DefaultServiceConfig (e.g. for pick_first).
	DialOptions []grpc.DialOption
	// How many times a Fetch that a stopping egressd turned away is sent again, to the
	// next replica, within the same deadline: refused (UNAVAILABLE, reason
	// SHUTTING_DOWN: nothing was sent upstream) or, for a GET, HEAD, OPTIONS or TRACE
	// (safe to repeat), cancelled (CANCELLED while the caller's context is not: gRPC
	// cancels calls that reach a server after its shutdown began). 0 means 3; negative,
	// none.
	ShutdownRetries int
}

// DefaultServiceConfig is the service config every client of egressd defaults to:
// calls round robin over every address the target resolves to (gRPC's own default,
// pick_first, sends them all to one), and client-side health checking, which takes a
// replica out of the rotation as soon as its health turns NOT_SERVING (egressd's first
// step at SIGTERM), before its GOAWAY.
const DefaultServiceConfig = `{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}}`

// Client calls egressd's Egress service. Safe for concurrent use; one Client (one
// gRPC channel) per process is the intended use.
type Client struct {
	conn    *grpc.ClientConn
	stub    egressv1.EgressClient
	timeout time.Duration
	md      metadata.MD
	retries int // Options.ShutdownRetries, resolved
}

// New dials target: host:port, or any gRPC target, e.g.
// dns:///egressd-headless.NAMESPACE.svc.cluster.local:50051 for every ready replica
// behind the headless Service egressd-headless (k8s/base/service.yaml). Calls go round
// robin over all the addresses the target resolves to (DefaultServiceConfig), skipping a
// replica whose health is NOT_SERVING; egressd's --grpc_max_connection_age makes the
// client re-resolve and reconnect, so it finds replicas that joined. New does not wait
// for a connection: a call made while egressd is unreachable fails UNAVAILABLE.
func New(target string, opts Options) (*Client, error) {
	dial := []grpc.DialOption{
		// Responses of any size: egressd bounds bodies itself (max_body_bytes, at most
		// limits.max_body_bytes_ceiling); gRPC's default of 4 MiB would refuse a FULL
		// body a caller asks for with a MaxBodyBytes over egressd's default (4 MiB -
		// 256 KiB).
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<31 - 1)),
		// Calls spread over every address the target resolves to (e.g. each replica
		// behind the headless Service,
		// dns:///egressd-headless.NAMESPACE.svc.cluster.local:50051), not one.
		grpc.WithDefaultServiceConfig(DefaultServiceConfig),
	}
	if opts.TLS == nil {
		dial = append(dial, grpc.WithInsecure())
	} else {
		config, err := tlsConfig(opts.TLS)
		if err != nil {
			return nil, err
		}
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(config)))
	}
	conn, err := grpc.Dial(target, append(dial, opts.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("egress: dial %s: %w", target, err)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	retries := opts.ShutdownRetries
	if retries == 0 {
		retries = 3
	} else if retries < 0 {
		retries = 0
	}
	return &Client{conn: conn, stub: egressv1.NewEgressClient(conn), timeout: timeout,
		md: metadata.New(opts.Metadata), retries: retries}, nil
}

func tlsConfig(t *TLS) (*tls.Config, error) {
	config := &tls.Config{ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := ioutil.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("egress: TLS CAFile: %w", err)
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("egress: TLS CAFile %s: no PEM certificate", t.CAFile)
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("egress: TLS CertFile and KeyFile go together")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("egress: TLS client certificate: %w", err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	return config, nil
}

// Close closes the channel; calls in flight fail CANCELED.
func (c *Client) Close() error { return c.conn.Close() }

// A FetchOption shapes the request.
type FetchOption func(*fetchConfig)

type fetchConfig struct {
	request *egressv1.FetchRequest
	timeout time.Duration
}

// Method sets the HTTP method (default GET).
func Method(method string) FetchOption {
	return func(f *fetchConfig) { f.request.Method = method }
}

// WithHeader adds a request header. A value that is not valid UTF-8 is sent byte for
// byte.
func WithHeader(name, value string) FetchOption {
	return func(f *fetchConfig) {
		h := &egressv1.Header{Name: name}
		if utf8.ValidString(value) {
			h.Value = value
		} else {
			h.ValueBytes = []byte(value)
		}
		f.request.Headers = append(f.request.Headers, h)
	}
}

// Body sets the request body.
func Body(body []byte) FetchOption {
	return func(f *fetchConfig) { f.request.Body = body }
}

// HeadOnly asks for status and headers only; egressd drains the body in the background.
func HeadOnly() FetchOption {
	return func(f *fetchConfig) { f.request.BodyMode = egressv1.BodyMode_BODY_MODE_NONE }
}

// Prefix asks for the first n bytes of the body (Response.BodyTruncated when there were
// more); egressd drains the rest.
func Prefix(n uint64) FetchOption {
	return func(f *fetchConfig) {
		f.request.BodyMode = egressv1.BodyMode_BODY_MODE_PREFIX
		f.request.MaxBodyBytes = n
	}
}

// MaxBodyBytes bounds a full body: a larger one fails RESOURCE_EXHAUSTED (0: egressd's
// default).
func MaxBodyBytes(n uint64) FetchOption {
	return func(f *fetchConfig) {
		f.request.BodyMode = egressv1.BodyMode_BODY_MODE_FULL
		f.request.MaxBodyBytes = n
	}
}

// FollowRedirects lets egressd follow 3xx responses.
func FollowRedirects() FetchOption {
	return func(f *fetchConfig) { f.request.FollowRedirects = true }
}

// Timeout bounds the upstream exchange (FetchRequest.timeout) and the call itself, on
// top of the context's deadline.
func Timeout(d time.Duration) FetchOption {
	return func(f *fetchConfig) {
		f.timeout = d
		f.request.Timeout = durationpb.New(d)
	}
}

// Request builds the FetchRequest that Fetch and FetchStream send.
func Request(url string, opts ...FetchOption) *egressv1.FetchRequest {
	return configure(url, opts).request
}

func configure(url string, opts []FetchOption) *fetchConfig {
	f := &fetchConfig{request: &egressv1.FetchRequest{
		Url: url, BodyMode: egressv1.BodyMode_BODY_MODE_FULL}}
	for _, opt := range opts {
		opt(f)
	}
	return f
}

// callContext is ctx with the client's metadata and a deadline: the option's timeout,
// else ctx's own, else the client's default.
func (c *Client) callContext(ctx context.Context, f *fetchConfig) (context.Context, context.CancelFunc) {
	if len(c.md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.Join(metadataOf(ctx), c.md))
	}
	if f.timeout > 0 {
		return context.WithTimeout(ctx, f.timeout)
	}
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

func metadataOf(ctx context.Context) metadata.MD {
	md, _ := metadata.FromOutgoingContext(ctx)
	return md
}

// Fetch performs one HTTP request through egressd.
func (c *Client) Fetch(ctx context.Context, url string, opts ...FetchOption) (*Response, error) {
	f := configure(url, opts)
	ctx, cancel := c.callContext(ctx, f)
	defer cancel()
	for attempt := 0; ; attempt++ {
		raw, err := c.stub.Fetch(ctx, f.request)
		if err == nil {
			return responseOf(raw), nil
		}
		e := errorOf(ctx, err)
		if !c.retryRefusal(ctx, e, f.request.GetMethod(), attempt) {
			return nil, e
		}
	}
}

// turnedAway: whether a stopping egressd turned a fetch of method away before its
// GOAWAY reached the channel (see Options.ShutdownRetries).
func turnedAway(ctx context.Context, err error, method string) bool {
	var e *Error
	if !errors.As(err, &e) || ctx.Err() != nil {
		return false // the caller's own cancellation or deadline is not a refusal
	}
	switch e.Code {
	case codes.Canceled:
		switch method {
		case "", "GET", "HEAD", "OPTIONS", "TRACE":
			return true
		}
		return false
	case codes.Unavailable:
		return e.Reason == "SHUTTING_DOWN"
	}
	return false
}

// retryRefusal: whether to send a fetch again after err, pausing first when needed.
func (c *Client) retryRefusal(ctx context.Context, err error, method string, attempt int) bool {
	if attempt >= c.retries || !turnedAway(ctx, err, method) {
		return false
	}
	// The first retry goes at once (round_robin hands it to the next replica); later
	// ones give the refusing replica's GOAWAY a moment to reach the channel.
	pause := 10 * time.Millisecond * time.Duration(attempt)
	if deadline, ok := ctx.Deadline(); ok && time.Now().Add(pause).After(deadline) {
		return false
	}
	if pause == 0 {
		return true
	}
	timer := time.NewTimer(pause)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Header is one response header as egressd received it.
type Header struct {
	Name  string
	Value string // as text: a value that is not UTF-8 is its bytes read as ISO-8859-1
	Bytes []byte // exactly as the upstream sent it
}

// ConnectionInfo says which upstream connection carried the request (like Go's
// httptrace.GotConnInfo).
type ConnectionInfo struct {
	Reused        bool // it had carried an earlier request
	WasIdle       bool
	IdleTime      time.Duration
	ID            uint64
	RemoteAddress string
}

// Timing of the upstream exchange; a phase that did not happen (DNS, connect and TLS
// on a reused connection) is 0.
type Timing struct {
	DNS, Connect, TLSHandshake, TimeToFirstByte, Total time.Duration
}

// Response of a Fetch (Body empty for HeadOnly) or the head of a FetchStream.
type Response struct {
	StatusCode    int
	Headers       []Header // in the order received
	Body          []byte
	BodyTruncated bool
	Connection    ConnectionInfo
	Timing        Timing
	TraceID       string
	Raw           *egressv1.FetchResponse
}

// Header is the first value of header name (case-insensitive), "" when there is none.
func (r *Response) Header(name string) string {
	v, _ := r.HeaderValue(name)
	return v
}

// HeaderValue is Header with whether the header was there at all.
func (r *Response) HeaderValue(name string) (string, bool) {
	for _, h := range r.Headers {
		if equalFold(h.Name, name) {
			return h.Value, true
		}
	}
	return "", false
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func latin1(b []byte) string {
	runes := make([]rune, len(b))
	for i, c := range b {
		runes[i] = rune(c)
	}
	return string(runes)
}

func responseOf(raw *egressv1.FetchResponse) *Response {
	r := &Response{
		StatusCode:    int(raw.GetStatusCode()),
		Body:          raw.GetBody(),
		BodyTruncated: raw.GetBodyTruncated(),
		TraceID:       raw.GetTraceId(),
		Raw:           raw,
	}
	for _, h := range raw.GetHeaders() {
		header := Header{Name: h.GetName(), Value: h.GetValue(), Bytes: []byte(h.GetValue())}
		if len(h.GetValueBytes()) > 0 {
			header.Bytes = h.GetValueBytes()
			if utf8.Valid(header.Bytes) {
				header.Value = string(header.Bytes)
			} else {
				header.Value = latin1(header.Bytes)
			}
		}
		r.Headers = append(r.Headers, header)
	}
	conn := raw.GetConnection()
	r.Connection = ConnectionInfo{
		Reused: conn.GetReused(), WasIdle: conn.GetWasIdle(), IdleTime: duration(conn.GetIdleTime()),
		ID: conn.GetConnectionId(), RemoteAddress: conn.GetRemoteAddress()}
	t := raw.GetTiming()
	r.Timing = Timing{DNS: duration(t.GetDns()), Connect: duration(t.GetConnect()),
		TLSHandshake: duration(t.GetTlsHandshake()), TimeToFirstByte: duration(t.GetTimeToFirstByte()),
		Total: duration(t.GetTotal())}
	return r
}

func duration(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}
