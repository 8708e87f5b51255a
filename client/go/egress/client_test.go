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
	"testing"
	"time"

	"egress/egressv1"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
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
	switch req.GetUrl() {
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
	for i := 0; i < 10; i++ {
		if _, err := client.Fetch(context.Background(), "http://up/"); err != nil {
			t.Fatal(err)
		}
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
