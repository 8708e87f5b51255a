package egress

import (
	"context"
	"errors"
	"io"
	"io/ioutil"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"egress.internal/client/egress/egressv1"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fakeEgress is an Egress server in the test's process: it answers as egressd would and
// records what each call carried.
type fakeEgress struct {
	egressv1.UnimplementedEgressServer
	deadlines chan time.Duration // time left until each call's deadline
	md        chan metadata.MD
	ended     chan error // why each FetchStream's context ended

	mu       sync.Mutex
	attempts map[string]int // Fetch calls per URL
}

// attempt counts a Fetch of url: how many there were before this one.
func (f *fakeEgress) attempt(url string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.attempts == nil {
		f.attempts = map[string]int{}
	}
	f.attempts[url]++
	return f.attempts[url] - 1
}

func (f *fakeEgress) attemptsOf(url string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[url]
}

func (f *fakeEgress) record(ctx context.Context) {
	if deadline, ok := ctx.Deadline(); ok {
		f.deadlines <- time.Until(deadline)
	} else {
		f.deadlines <- -1
	}
	md, _ := metadata.FromIncomingContext(ctx)
	f.md <- md
}

func (f *fakeEgress) Fetch(ctx context.Context, req *egressv1.FetchRequest) (*egressv1.FetchResponse, error) {
	f.record(ctx)
	earlier := f.attempt(req.GetUrl())
	switch req.GetUrl() {
	case "http://refused-once/": // a stopping egressd's refusal, then an answer
		if earlier == 0 {
			s, _ := status.New(codes.Unavailable, "egressd is shutting down").WithDetails(
				&errdetails.ErrorInfo{Reason: "SHUTTING_DOWN", Domain: "egress.v1"})
			return nil, s.Err()
		}
	case "http://refused/": // refused every time
		s, _ := status.New(codes.Unavailable, "egressd is shutting down").WithDetails(
			&errdetails.ErrorInfo{Reason: "SHUTTING_DOWN", Domain: "egress.v1"})
		return nil, s.Err()
	case "http://unavailable/": // UNAVAILABLE for another reason (an upstream's reset)
		s, _ := status.New(codes.Unavailable, "connection reset").WithDetails(
			&errdetails.ErrorInfo{Reason: "UPSTREAM_RESET", Domain: "egress.v1"})
		return nil, s.Err()
	case "http://cancelled-once/": // what gRPC gives a call reaching a server shutting down
		if earlier == 0 {
			return nil, status.Error(codes.Canceled, "")
		}
	case "http://denied/":
		s, _ := status.New(codes.PermissionDenied, "egress policy denies host denied").WithDetails(
			&errdetails.ErrorInfo{Reason: "POLICY_DENIED", Domain: "egress.v1",
				Metadata: map[string]string{"rule": "default_deny", "host": "denied"}},
			&errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)})
		return nil, s.Err()
	case "http://slow/":
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &egressv1.FetchResponse{
		StatusCode: 200,
		Headers: []*egressv1.Header{
			{Name: "Content-Type", Value: "text/plain"},
			{Name: "Content-Disposition", ValueBytes: []byte("caf\xe9")},
		},
		Body:       []byte("body of " + req.GetUrl() + " mode " + req.GetBodyMode().String()),
		Connection: &egressv1.ConnectionInfo{Reused: true, ConnectionId: 7, RemoteAddress: "127.0.0.1:80"},
		Timing:     &egressv1.Timing{Total: durationpb.New(3 * time.Millisecond)},
	}, nil
}

func (f *fakeEgress) FetchStream(req *egressv1.FetchRequest, stream egressv1.Egress_FetchStreamServer) error {
	f.record(stream.Context())
	head := &egressv1.FetchResponse{StatusCode: 200}
	if err := stream.Send(&egressv1.FetchChunk{Part: &egressv1.FetchChunk_Head{Head: head}}); err != nil {
		return err
	}
	chunks := 3
	if req.GetUrl() == "http://endless/" {
		chunks = 1 << 30
	}
	for i := 0; i < chunks; i++ {
		body := []byte(strings.Repeat("x", 1000))
		if err := stream.Send(&egressv1.FetchChunk{Part: &egressv1.FetchChunk_Body{Body: body}}); err != nil {
			break
		}
	}
	if chunks == 3 {
		f.ended <- nil
		return nil
	}
	<-stream.Context().Done() // the endless stream ends when the client cancels it
	f.ended <- stream.Context().Err()
	return nil
}

// serveFake starts a fake egressd on a loopback port: its address and the fake.
func serveFake(t *testing.T) (string, *fakeEgress) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeEgress{deadlines: make(chan time.Duration, 100), md: make(chan metadata.MD, 100),
		ended: make(chan error, 10)}
	server := grpc.NewServer()
	egressv1.RegisterEgressServer(server, fake)
	go server.Serve(listener)
	t.Cleanup(server.Stop)
	return listener.Addr().String(), fake
}

func startFake(t *testing.T, opts Options) (*Client, *fakeEgress) {
	t.Helper()
	address, fake := serveFake(t)
	client, err := New(address, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client, fake
}

func TestFetchGivesStatusHeadersBodyConnectionAndTiming(t *testing.T) {
	client, _ := startFake(t, Options{})
	resp, err := client.Fetch(context.Background(), "http://up/", HeadOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || string(resp.Body) != "body of http://up/ mode BODY_MODE_NONE" {
		t.Errorf("got %d %q", resp.StatusCode, resp.Body)
	}
	if got := resp.Header("content-type"); got != "text/plain" {
		t.Errorf("Header(content-type) = %q", got)
	}
	// A value that is not UTF-8 reads as ISO-8859-1; Bytes keeps it as sent.
	if got := resp.Header("CONTENT-DISPOSITION"); got != "café" {
		t.Errorf("Header(content-disposition) = %q", got)
	}
	if got := string(resp.Headers[1].Bytes); got != "caf\xe9" {
		t.Errorf("Bytes = %q", got)
	}
	if _, ok := resp.HeaderValue("X-Absent"); ok || resp.Header("X-Absent") != "" {
		t.Error("an absent header was found")
	}
	if !resp.Connection.Reused || resp.Connection.ID != 7 || resp.Connection.RemoteAddress != "127.0.0.1:80" {
		t.Errorf("Connection = %+v", resp.Connection)
	}
	if resp.Timing.Total != 3*time.Millisecond || resp.Timing.DNS != 0 {
		t.Errorf("Timing = %+v", resp.Timing)
	}
}

func TestTheContextDeadlineTravelsToEgressd(t *testing.T) {
	client, fake := startFake(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.Fetch(ctx, "http://up/"); err != nil {
		t.Fatal(err)
	}
	if left := <-fake.deadlines; left <= 4*time.Second || left > 5*time.Second {
		t.Errorf("egressd saw %v left, want just under 5s", left)
	}
}

func TestACallWithoutADeadlineGetsTheDefaultTimeout(t *testing.T) {
	client, fake := startFake(t, Options{Timeout: 2 * time.Second})
	if _, err := client.Fetch(context.Background(), "http://up/"); err != nil {
		t.Fatal(err)
	}
	if left := <-fake.deadlines; left <= time.Second || left > 2*time.Second {
		t.Errorf("egressd saw %v left, want just under 2s", left)
	}
}

func TestTheTimeoutOptionSetsTheRequestTimeoutAndTheDeadline(t *testing.T) {
	if got := Request("http://up/", Timeout(time.Second)).GetTimeout().AsDuration(); got != time.Second {
		t.Errorf("FetchRequest.timeout = %v", got)
	}
	client, fake := startFake(t, Options{})
	if _, err := client.Fetch(context.Background(), "http://up/", Timeout(time.Second)); err != nil {
		t.Fatal(err)
	}
	if left := <-fake.deadlines; left > time.Second {
		t.Errorf("egressd saw %v left, want under 1s", left)
	}
}

func TestADenialIsAnErrorWithCodeReasonMetadataAndRetryDelay(t *testing.T) {
	client, _ := startFake(t, Options{})
	_, err := client.Fetch(context.Background(), "http://denied/")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%T %v is not an *Error", err, err)
	}
	if e.Code != codes.PermissionDenied || e.CodeName() != "PERMISSION_DENIED" ||
		e.Message != "egress policy denies host denied" {
		t.Errorf("got %v / %q", e.Code, e.Message)
	}
	if e.Reason != "POLICY_DENIED" || e.Domain != "egress.v1" || e.Metadata["rule"] != "default_deny" ||
		e.Metadata["host"] != "denied" {
		t.Errorf("ErrorInfo: %q %q %v", e.Reason, e.Domain, e.Metadata)
	}
	if e.RetryDelay != 1500*time.Millisecond {
		t.Errorf("RetryDelay = %v", e.RetryDelay)
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("status.Code = %v", status.Code(err))
	}
	if want := "egress: PERMISSION_DENIED: egress policy denies host denied [POLICY_DENIED]"; err.Error() != want {
		t.Errorf("Error() = %q", err.Error())
	}
}

func TestCancellingTheContextCancelsTheCall(t *testing.T) {
	client, _ := startFake(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := client.Fetch(ctx, "http://slow/")
	var e *Error
	if !errors.As(err, &e) || e.Code != codes.Canceled || !errors.Is(err, context.Canceled) {
		t.Errorf("got %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = client.Fetch(ctx, "http://slow/")
	// (Not errors.Is(err, context.DeadlineExceeded): the server's deadline, derived from
	// the caller's, may fire first and its status arrive before the context has ended.)
	if !errors.As(err, &e) || e.Code != codes.DeadlineExceeded {
		t.Errorf("got %v", err)
	}
}

func TestMetadataGoesWithEveryCall(t *testing.T) {
	client, fake := startFake(t, Options{Metadata: map[string]string{"x-egress-caller": "billing"}})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-request-id", "42")
	if _, err := client.Fetch(ctx, "http://up/"); err != nil {
		t.Fatal(err)
	}
	md := <-fake.md
	if got := md.Get("x-egress-caller"); len(got) != 1 || got[0] != "billing" {
		t.Errorf("x-egress-caller = %v", got)
	}
	if got := md.Get("x-request-id"); len(got) != 1 || got[0] != "42" {
		t.Errorf("the caller's own metadata was lost: %v", got)
	}
}

func TestFetchStreamReadsTheWholeBody(t *testing.T) {
	client, fake := startFake(t, Options{})
	stream, err := client.FetchStream(context.Background(), "http://up/")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if stream.StatusCode != 200 {
		t.Errorf("StatusCode = %d", stream.StatusCode)
	}
	body, err := ioutil.ReadAll(stream)
	if err != nil || len(body) != 3000 {
		t.Errorf("read %d bytes, %v", len(body), err)
	}
	if n, err := stream.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("after the end: %d, %v", n, err)
	}
	if err := <-fake.ended; err != nil {
		t.Errorf("the server's stream ended by %v", err)
	}
}

func TestClosingAStreamEarlyCancelsIt(t *testing.T) {
	client, fake := startFake(t, Options{})
	stream, err := client.FetchStream(context.Background(), "http://endless/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(stream, make([]byte, 1500)); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	select {
	case err := <-fake.ended:
		if err != context.Canceled {
			t.Errorf("the server's stream ended by %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server's stream was not cancelled")
	}
	if _, err := stream.Read(make([]byte, 1)); err == nil || err == io.EOF {
		t.Errorf("Read after Close: %v", err)
	}
}

func TestCallsGoRoundRobinOverEveryAddressOfTheTarget(t *testing.T) {
	first, a := serveFake(t)
	second, b := serveFake(t)
	replicas := manual.NewBuilderWithScheme("replicas")
	replicas.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: first}, {Addr: second}}})
	client, err := New("replicas:///egressd", Options{DialOptions: []grpc.DialOption{grpc.WithResolvers(replicas)}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// Until both have had calls (2 s at most): the first calls may come while only one
	// of the two connections is ready (each becomes so after its health check).
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		if _, err := client.Fetch(context.Background(), "http://up/"); err != nil {
			t.Fatal(err)
		}
		if len(a.deadlines) > 0 && len(b.deadlines) > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if len(a.deadlines) == 0 || len(b.deadlines) == 0 {
		t.Errorf("calls: %d on the first replica, %d on the second", len(a.deadlines), len(b.deadlines))
	}
}

func TestABadTLSFileFailsNew(t *testing.T) {
	_, err := New("127.0.0.1:1", Options{TLS: &TLS{CAFile: "/no/such/ca.pem"}})
	if err == nil || !strings.Contains(err.Error(), "/no/such/ca.pem") {
		t.Errorf("got %v", err)
	}
}

// Against a running egressd, when EGRESS_TARGET (its --grpc_listen) and EGRESS_TEST_URL
// (an upstream URL its policy allows, with a body of a few KiB) are set, as
// tests/e2e/clients_test.cc does; EGRESS_TEST_DENIED_URL, if set, is one its policy
// denies.
func live(t *testing.T) (*Client, string) {
	target, url := os.Getenv("EGRESS_TARGET"), os.Getenv("EGRESS_TEST_URL")
	if target == "" || url == "" {
		t.Skip("EGRESS_TARGET and EGRESS_TEST_URL name no egressd")
	}
	client, err := New(target, Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client, url
}

// EGRESS_TEST_TIME_SCALE, which the sanitizer configs set: their egressd runs slower.
func timeScale() time.Duration {
	if n, err := strconv.Atoi(os.Getenv("EGRESS_TEST_TIME_SCALE")); err == nil && n > 1 {
		return time.Duration(n)
	}
	return 1
}

func TestLiveTheSecondFetchReusesTheConnection(t *testing.T) {
	client, url := live(t)
	first, err := client.Fetch(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	second, err := client.Fetch(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	if second.StatusCode != 200 || len(second.Body) == 0 || second.Header("Content-Length") == "" {
		t.Errorf("got %d, %d bytes, Content-Length %q", second.StatusCode, len(second.Body),
			second.Header("Content-Length"))
	}
	if !second.Connection.Reused || second.Connection.ID != first.Connection.ID {
		t.Errorf("first %+v, second %+v", first.Connection, second.Connection)
	}
	if second.Timing.Total <= 0 {
		t.Errorf("Timing = %+v", second.Timing)
	}
}

func TestLiveAStreamClosedEarlyLeavesAReusableConnection(t *testing.T) {
	client, url := live(t)
	stream, err := client.FetchStream(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	stream.Close() // egressd drains the rest
	// The drain ends within its time cap (50 ms by default); after it the connection is
	// the newest idle one, which egressd's pool hands out first. Fetching before that
	// would take (and drain, and return on top) another connection.
	time.Sleep(300 * time.Millisecond * timeScale())
	resp, err := client.Fetch(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Connection.Reused || resp.Connection.ID != stream.Connection.ID {
		t.Errorf("the stream's connection %d did not come back: got %+v", stream.Connection.ID,
			resp.Connection)
	}
}

func TestLiveABadURLIsInvalidArgument(t *testing.T) {
	client, _ := live(t)
	_, err := client.Fetch(context.Background(), "not a url")
	var e *Error
	if !errors.As(err, &e) || e.Code != codes.InvalidArgument || e.Message == "" {
		t.Errorf("got %v", err)
	}
}

func TestLiveAPolicyDenialNamesItsReason(t *testing.T) {
	client, _ := live(t)
	denied := os.Getenv("EGRESS_TEST_DENIED_URL")
	if denied == "" {
		t.Skip("EGRESS_TEST_DENIED_URL is not set")
	}
	_, err := client.Fetch(context.Background(), denied)
	var e *Error
	if !errors.As(err, &e) || e.Code != codes.PermissionDenied || e.Reason != "POLICY_DENIED" ||
		e.Domain != "egress.v1" || e.Metadata["rule"] == "" {
		t.Errorf("got %v (%+v)", err, e)
	}
}

func TestAFetchAStoppingEgressdRefusedGoesAgain(t *testing.T) {
	client, fake := startFake(t, Options{})
	resp, err := client.Fetch(context.Background(), "http://refused-once/")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || fake.attemptsOf("http://refused-once/") != 2 {
		t.Fatalf("status %d after %d attempts, want 200 after 2", resp.StatusCode,
			fake.attemptsOf("http://refused-once/"))
	}
	// A GET cancelled by the server (not by the caller) goes again too.
	if _, err := client.Fetch(context.Background(), "http://cancelled-once/"); err != nil {
		t.Fatal(err)
	}
	if n := fake.attemptsOf("http://cancelled-once/"); n != 2 {
		t.Fatalf("a cancelled GET: %d attempts, want 2", n)
	}
}

func TestShutdownRetriesBoundTheAttempts(t *testing.T) {
	client, fake := startFake(t, Options{})
	_, err := client.Fetch(context.Background(), "http://refused/")
	var e *Error
	if !errors.As(err, &e) || e.Code != codes.Unavailable || e.Reason != "SHUTTING_DOWN" {
		t.Fatalf("got %v, want UNAVAILABLE [SHUTTING_DOWN]", err)
	}
	if n := fake.attemptsOf("http://refused/"); n != 4 {
		t.Fatalf("%d attempts, want 1 + the default 3 retries", n)
	}
	none, fakeNone := startFake(t, Options{ShutdownRetries: -1})
	if _, err := none.Fetch(context.Background(), "http://refused/"); err == nil {
		t.Fatal("a refusal without retries succeeded")
	}
	if n := fakeNone.attemptsOf("http://refused/"); n != 1 {
		t.Fatalf("ShutdownRetries -1: %d attempts, want 1", n)
	}
}

func TestWhatIsNotARefusalIsNotSentAgain(t *testing.T) {
	client, fake := startFake(t, Options{})
	// A POST that egressd cancelled may have gone upstream: not repeated.
	_, err := client.Fetch(context.Background(), "http://cancelled-once/", Method("POST"))
	var e *Error
	if !errors.As(err, &e) || e.Code != codes.Canceled {
		t.Fatalf("a cancelled POST: got %v, want CANCELLED", err)
	}
	if n := fake.attemptsOf("http://cancelled-once/"); n != 1 {
		t.Fatalf("a cancelled POST: %d attempts, want 1", n)
	}
	// UNAVAILABLE for another reason than SHUTTING_DOWN.
	if _, err := client.Fetch(context.Background(), "http://unavailable/"); err == nil {
		t.Fatal("an upstream reset succeeded")
	}
	if n := fake.attemptsOf("http://unavailable/"); n != 1 {
		t.Fatalf("UNAVAILABLE [UPSTREAM_RESET]: %d attempts, want 1", n)
	}
	// The caller's own cancellation.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := client.Fetch(ctx, "http://slow/"); err == nil {
		t.Fatal("a cancelled fetch succeeded")
	}
	if n := fake.attemptsOf("http://slow/"); n != 1 {
		t.Fatalf("the caller's cancellation: %d attempts, want 1", n)
	}
}

// fixedHealth answers every health check and watch with one status.
type fixedHealth struct {
	status  healthpb.HealthCheckResponse_ServingStatus
	watched chan struct{} // gets one value per Watch
}

func (h fixedHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: h.status}, nil
}

func (h fixedHealth) Watch(_ *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	if err := stream.Send(&healthpb.HealthCheckResponse{Status: h.status}); err != nil {
		return err
	}
	select {
	case h.watched <- struct{}{}:
	default:
	}
	<-stream.Context().Done()
	return nil
}

func TestAReplicaWhoseHealthIsNotServingGetsNoCalls(t *testing.T) {
	// Two fakes with grpc.health.v1: the second one NOT_SERVING, as egressd is from
	// SIGTERM on. The default service config's healthCheckConfig keeps it out of the
	// rotation: grpc-go honours it only because client.go imports grpc/health (this file
	// does not: its health servers are its own, over the generated grpc_health_v1).
	serve := func(serving healthpb.HealthCheckResponse_ServingStatus) (string, *fakeEgress, chan struct{}) {
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		fake := &fakeEgress{deadlines: make(chan time.Duration, 100), md: make(chan metadata.MD, 100),
			ended: make(chan error, 10)}
		server := grpc.NewServer()
		egressv1.RegisterEgressServer(server, fake)
		watched := make(chan struct{}, 10)
		healthpb.RegisterHealthServer(server, fixedHealth{serving, watched})
		go server.Serve(listener)
		t.Cleanup(server.Stop)
		return listener.Addr().String(), fake, watched
	}
	first, a, _ := serve(healthpb.HealthCheckResponse_SERVING)
	second, b, watched := serve(healthpb.HealthCheckResponse_NOT_SERVING)
	replicas := manual.NewBuilderWithScheme("healthy")
	replicas.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: first}, {Addr: second}}})
	client, err := New("healthy:///egressd", Options{DialOptions: []grpc.DialOption{grpc.WithResolvers(replicas)}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.Fetch(context.Background(), "http://up/"); err != nil {
		t.Fatal(err)
	}
	select { // the client asked the second one's health (and heard NOT_SERVING)
	case <-watched:
	case <-time.After(5 * time.Second):
		t.Fatal("the client never watched the health of the second replica")
	}
	time.Sleep(50 * time.Millisecond) // time to connect to it, were it taken in
	for i := 1; i < 10; i++ {
		if _, err := client.Fetch(context.Background(), "http://up/"); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.deadlines) != 10 || len(b.deadlines) != 0 {
		t.Errorf("calls: %d on the serving replica, %d on the NOT_SERVING one", len(a.deadlines),
			len(b.deadlines))
	}
}
