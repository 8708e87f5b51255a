package egress.client;

import com.google.protobuf.Any;
import com.google.protobuf.ByteString;
import egress.v1.EgressGrpc;
import egress.v1.EgressOuterClass.ConnectionInfo;
import egress.v1.EgressOuterClass.FetchChunk;
import egress.v1.EgressOuterClass.FetchRequest;
import egress.v1.EgressOuterClass.FetchResponse;
import egress.v1.EgressOuterClass.Header;
import google.rpc.ErrorDetails.ErrorInfo;
import google.rpc.ErrorDetails.RetryInfo;
import google.rpc.StatusOuterClass;
import io.grpc.Context;
import io.grpc.Deadline;
import io.grpc.EquivalentAddressGroup;
import io.grpc.NameResolver;
import io.grpc.NameResolverProvider;
import io.grpc.NameResolverRegistry;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Tests of the Java client, without a test framework (Debian has no JUnit 5 jars this
 * build uses): every public method named test* runs against an in-process fake of
 * egressd; the testLive* ones run against a real egressd when EGRESS_TARGET (its
 * --grpc_listen) and EGRESS_TEST_URL (a URL its policy allows) are set, and
 * EGRESS_TEST_DENIED_URL is one it denies. Prints "PASS name" or "FAIL name: why" per
 * test, "SKIP name" for a live one without a target; exits 1 when any failed.
 *   java -cp "$(cat DIR/classpath)" egress.client.EgressClientTest
 */
public final class EgressClientTest {
  static final class Skip extends RuntimeException {}

  static void check(boolean condition, String what) {
    if (!condition) throw new AssertionError(what);
  }

  /** The fake: answers as egressd would and records what each call carried. */
  static final class FakeEgress extends EgressGrpc.EgressImplBase {
    final BlockingQueue<Long> deadlineMillis = new LinkedBlockingQueue<>();
    final BlockingQueue<String> callers = new LinkedBlockingQueue<>();
    final BlockingQueue<String> streamEnds = new LinkedBlockingQueue<>();
    /** Fetch calls per URL. */
    final java.util.concurrent.ConcurrentHashMap<String, java.util.concurrent.atomic.AtomicInteger>
        attempts = new java.util.concurrent.ConcurrentHashMap<>();

    int attemptsOf(String url) {
      java.util.concurrent.atomic.AtomicInteger n = attempts.get(url);
      return n == null ? 0 : n.get();
    }

    /** A stopping egressd's refusal: UNAVAILABLE with ErrorInfo reason `reason`. */
    static io.grpc.StatusRuntimeException unavailable(String reason) {
      StatusOuterClass.Status details = StatusOuterClass.Status.newBuilder()
          .setCode(Status.Code.UNAVAILABLE.value()).setMessage("egressd is shutting down")
          .addDetails(Any.pack(ErrorInfo.newBuilder().setReason(reason).setDomain("egress.v1").build()))
          .build();
      Metadata trailers = new Metadata();
      trailers.put(Metadata.Key.of("grpc-status-details-bin", Metadata.BINARY_BYTE_MARSHALLER),
                   details.toByteArray());
      return Status.UNAVAILABLE.withDescription("egressd is shutting down").asRuntimeException(trailers);
    }
    static final Metadata.Key<String> CALLER =
        Metadata.Key.of("x-egress-caller", Metadata.ASCII_STRING_MARSHALLER);
    static final Context.Key<String> CALLER_CONTEXT = Context.key("caller");

    void record() {
      Deadline deadline = Context.current().getDeadline();
      deadlineMillis.add(deadline == null ? -1 : deadline.timeRemaining(TimeUnit.MILLISECONDS));
      String caller = CALLER_CONTEXT.get();
      callers.add(caller == null ? "" : caller);
    }

    @Override
    public void fetch(FetchRequest request, StreamObserver<FetchResponse> response) {
      record();
      int earlier = attempts.computeIfAbsent(request.getUrl(),
          u -> new java.util.concurrent.atomic.AtomicInteger()).getAndIncrement();
      switch (request.getUrl()) {
        case "http://refused-once/":  // a stopping egressd's refusal, then an answer
          if (earlier == 0) {
            response.onError(unavailable("SHUTTING_DOWN"));
            return;
          }
          break;
        case "http://refused/":  // refused every time
          response.onError(unavailable("SHUTTING_DOWN"));
          return;
        case "http://goaway-once/":  // how grpc-java fails a call on a connection that got GOAWAY
        case "http://goaway-post-once/":
          if (earlier == 0) {
            response.onError(Status.UNAVAILABLE.withDescription(
                "GOAWAY shut down transport. HTTP/2 error code: NO_ERROR").asRuntimeException());
            return;
          }
          break;
        case "http://unavailable/":  // UNAVAILABLE for another reason
          response.onError(unavailable("UPSTREAM_RESET"));
          return;
        case "http://cancelled-once/":  // what gRPC gives a call reaching a server shutting down
          if (earlier == 0) {
            response.onError(Status.CANCELLED.asRuntimeException());
            return;
          }
          break;
        default:
          break;
      }
      if (request.getUrl().equals("http://denied/")) {
        StatusOuterClass.Status details = StatusOuterClass.Status.newBuilder()
            .setCode(Status.Code.PERMISSION_DENIED.value())
            .setMessage("egress policy denies host denied")
            .addDetails(Any.pack(ErrorInfo.newBuilder().setReason("POLICY_DENIED")
                .setDomain("egress.v1").putMetadata("rule", "default_deny")
                .putMetadata("host", "denied").build()))
            .addDetails(Any.pack(RetryInfo.newBuilder().setRetryDelay(
                com.google.protobuf.Duration.newBuilder().setSeconds(1).setNanos(500_000_000)).build()))
            .build();
        Metadata trailers = new Metadata();
        trailers.put(Metadata.Key.of("grpc-status-details-bin", Metadata.BINARY_BYTE_MARSHALLER),
                     details.toByteArray());
        response.onError(Status.PERMISSION_DENIED.withDescription("egress policy denies host denied")
                             .asRuntimeException(trailers));
        return;
      }
      if (request.getUrl().equals("http://slow/")) return;  // never answers: the deadline ends it
      response.onNext(FetchResponse.newBuilder().setStatusCode(200)
          .addHeaders(Header.newBuilder().setName("Content-Type").setValue("text/plain"))
          .addHeaders(Header.newBuilder().setName("Content-Disposition")
              .setRawValue(ByteString.copyFrom(new byte[] {'c', 'a', 'f', (byte) 0xe9})))
          .setBody(ByteString.copyFromUtf8("body of " + request.getUrl() + " " + request.getBodyMode()))
          .setConnection(ConnectionInfo.newBuilder().setReused(true).setConnectionId(7))
          .build());
      response.onCompleted();
    }

    @Override
    public void fetchStream(FetchRequest request, StreamObserver<FetchChunk> chunks) {
      record();
      chunks.onNext(FetchChunk.newBuilder().setHead(FetchResponse.newBuilder().setStatusCode(200)).build());
      boolean endless = request.getUrl().equals("http://endless/");
      ByteString body = ByteString.copyFromUtf8("x".repeat(1000));
      for (int i = 0; endless ? !Context.current().isCancelled() : i < 3; ++i) {
        chunks.onNext(FetchChunk.newBuilder().setBody(body).build());
        if (endless) {
          try {
            Thread.sleep(1);
          } catch (InterruptedException e) {
            return;
          }
        }
      }
      streamEnds.add(Context.current().isCancelled() ? "cancelled" : "completed");
      if (!endless) chunks.onCompleted();
    }
  }

  FakeEgress fake;
  Server server;
  EgressClient client;

  void startFake(EgressClient.Builder options) throws IOException {
    fake = new FakeEgress();
    String name = "fake-" + System.nanoTime();
    ServerInterceptor callerToContext = new ServerInterceptor() {
      @Override
      public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                         ServerCallHandler<Q, R> next) {
        Context context = Context.current().withValue(FakeEgress.CALLER_CONTEXT,
                                                      headers.get(FakeEgress.CALLER));
        return io.grpc.Contexts.interceptCall(context, call, headers, next);
      }
    };
    server = InProcessServerBuilder.forName(name)
        .addService(ServerInterceptors.intercept(fake, callerToContext)).build().start();
    client = options.channel(InProcessChannelBuilder.forName(name).build()).build();
  }

  EgressClient.Builder fakeOptions() { return EgressClient.newBuilder("fake"); }

  public void testFetchGivesStatusHeadersBodyAndConnection() throws Exception {
    startFake(fakeOptions());
    Response r = client.fetch("http://up/", FetchOptions.defaults().headOnly());
    check(r.statusCode() == 200, "status " + r.statusCode());
    String body = new String(r.body(), StandardCharsets.UTF_8);
    check(body.equals("body of http://up/ BODY_MODE_NONE"), body);
    check("text/plain".equals(r.header("content-type")), "Content-Type " + r.header("content-type"));
    // Not UTF-8: read as ISO-8859-1; headerBytes keeps the bytes.
    check("caf\u00e9".equals(r.header("CONTENT-DISPOSITION")), r.header("CONTENT-DISPOSITION"));
    check(r.headerBytes("content-disposition").length == 4, "headerBytes");
    check(r.header("X-Absent") == null, "an absent header was found");
    check(r.reused() && r.connectionId() == 7, "connection " + r.raw().getConnection());
  }

  public void testTheDefaultTimeoutIsTheDeadline() throws Exception {
    startFake(fakeOptions().timeout(Duration.ofSeconds(2)));
    client.fetch("http://up/");
    long left = fake.deadlineMillis.take();
    check(left > 1000 && left <= 2000, "egressd saw " + left + " ms left");
  }

  public void testTheTimeoutOptionSetsTheDeadlineAndTheRequestTimeout() throws Exception {
    check(FetchOptions.defaults().timeout(Duration.ofMillis(1500)).toRequest("u").getTimeout().getNanos()
          == 500_000_000, "FetchRequest.timeout");
    startFake(fakeOptions());
    client.fetch("http://up/", FetchOptions.defaults().timeout(Duration.ofSeconds(1)));
    long left = fake.deadlineMillis.take();
    check(left > 0 && left <= 1000, "egressd saw " + left + " ms left");
    try {
      client.fetch("http://slow/", FetchOptions.defaults().timeout(Duration.ofMillis(100)));
      check(false, "no error");
    } catch (EgressException e) {
      check(e.code() == Status.Code.DEADLINE_EXCEEDED, "code " + e.code());
      check(e.reason() == null && e.metadata().isEmpty(), "an ErrorInfo from nowhere");
    }
  }

  public void testADenialIsAnExceptionWithCodeReasonMetadataAndRetryDelay() throws Exception {
    startFake(fakeOptions());
    try {
      client.fetch("http://denied/");
      check(false, "no error");
    } catch (EgressException e) {
      check(e.code() == Status.Code.PERMISSION_DENIED, "code " + e.code());
      check(e.description().equals("egress policy denies host denied"), e.description());
      check("POLICY_DENIED".equals(e.reason()) && "egress.v1".equals(e.domain()), e.reason());
      check("default_deny".equals(e.metadata().get("rule")) && "denied".equals(e.metadata().get("host")),
            e.metadata().toString());
      check(e.retryDelay().equals(java.util.Optional.of(Duration.ofMillis(1500))), "" + e.retryDelay());
      check(e.getMessage().equals("PERMISSION_DENIED: egress policy denies host denied [POLICY_DENIED]"),
            e.getMessage());
    }
  }

  public void testFetchAsyncCompletesAndFailsWithEgressException() throws Exception {
    startFake(fakeOptions());
    check(client.fetchAsync("http://up/", FetchOptions.defaults()).get(5, TimeUnit.SECONDS).statusCode()
          == 200, "status");
    try {
      client.fetchAsync("http://denied/", FetchOptions.defaults()).get(5, TimeUnit.SECONDS);
      check(false, "no error");
    } catch (ExecutionException e) {
      check(e.getCause() instanceof EgressException, "cause " + e.getCause());
      check("POLICY_DENIED".equals(((EgressException) e.getCause()).reason()), "reason");
    }
    CompletableFuture<Response> slow = client.fetchAsync("http://slow/", FetchOptions.defaults());
    slow.cancel(true);
    check(slow.isCancelled(), "not cancelled");
  }

  public void testAFetchAStoppingEgressdRefusedGoesAgain() throws Exception {
    startFake(fakeOptions());
    check(client.fetch("http://refused-once/").statusCode() == 200, "status");
    check(fake.attemptsOf("http://refused-once/") == 2, "attempts " + fake.attemptsOf("http://refused-once/"));
    // A GET cancelled by the server (not by the caller) goes again too.
    check(client.fetch("http://cancelled-once/").statusCode() == 200, "status");
    check(fake.attemptsOf("http://cancelled-once/") == 2, "a cancelled GET: attempts "
          + fake.attemptsOf("http://cancelled-once/"));
    // fetchAsync retries the same way.
    fake.attempts.clear();
    check(client.fetchAsync("http://refused-once/", FetchOptions.defaults()).get(5, TimeUnit.SECONDS)
          .statusCode() == 200, "async status");
    check(fake.attemptsOf("http://refused-once/") == 2, "async attempts "
          + fake.attemptsOf("http://refused-once/"));
  }

  public void testAGetAGoawayFailedIsSentAgainAndAPostIsNot() throws Exception {
    startFake(fakeOptions());
    Response response = client.fetch("http://goaway-once/");
    check(response.statusCode() == 200, "status " + response.statusCode());
    check(fake.attemptsOf("http://goaway-once/") == 2, "GET attempts "
          + fake.attemptsOf("http://goaway-once/"));
    // grpc-java fails a stream the server did see the same way when the connection closes
    // after the GOAWAY's grace: a POST may have gone upstream.
    try {
      client.fetch("http://goaway-post-once/", FetchOptions.defaults().method("POST"));
      check(false, "a POST a GOAWAY failed succeeded");
    } catch (EgressException e) {
      check(e.code() == Status.Code.UNAVAILABLE, e.getMessage());
    }
    check(fake.attemptsOf("http://goaway-post-once/") == 1, "POST attempts "
          + fake.attemptsOf("http://goaway-post-once/"));
  }

  public void testShutdownRetriesBoundTheAttempts() throws Exception {
    startFake(fakeOptions());
    try {
      client.fetch("http://refused/");
      check(false, "no error");
    } catch (EgressException e) {
      check(e.code() == Status.Code.UNAVAILABLE && "SHUTTING_DOWN".equals(e.reason()), e.getMessage());
    }
    check(fake.attemptsOf("http://refused/") == 4, "attempts " + fake.attemptsOf("http://refused/")
          + ", want 1 + the default 3 retries");
    client.close();
    server.shutdownNow();
    startFake(fakeOptions().shutdownRetries(0));
    try {
      client.fetch("http://refused/");
      check(false, "no error");
    } catch (EgressException e) {
      check(e.code() == Status.Code.UNAVAILABLE, e.getMessage());
    }
    check(fake.attemptsOf("http://refused/") == 1, "shutdownRetries(0): attempts "
          + fake.attemptsOf("http://refused/"));
  }

  public void testWhatIsNotARefusalIsNotSentAgain() throws Exception {
    startFake(fakeOptions());
    // A POST that egressd cancelled may have gone upstream: not repeated.
    try {
      client.fetch("http://cancelled-once/", FetchOptions.defaults().method("POST"));
      check(false, "a cancelled POST succeeded");
    } catch (EgressException e) {
      check(e.code() == Status.Code.CANCELLED, e.getMessage());
    }
    check(fake.attemptsOf("http://cancelled-once/") == 1, "a cancelled POST: attempts "
          + fake.attemptsOf("http://cancelled-once/"));
    // UNAVAILABLE for another reason than SHUTTING_DOWN.
    try {
      client.fetch("http://unavailable/");
      check(false, "an upstream reset succeeded");
    } catch (EgressException e) {
      check(e.code() == Status.Code.UNAVAILABLE, e.getMessage());
    }
    check(fake.attemptsOf("http://unavailable/") == 1, "UPSTREAM_RESET: attempts "
          + fake.attemptsOf("http://unavailable/"));
  }

  public void testMetadataGoesWithEveryCall() throws Exception {
    startFake(fakeOptions().metadata("x-egress-caller", "billing"));
    client.fetch("http://up/");
    String caller = fake.callers.take();
    check(caller.equals("billing"), "x-egress-caller " + caller);
  }

  public void testFetchStreamReadsTheWholeBody() throws Exception {
    startFake(fakeOptions());
    try (FetchStream stream = client.fetchStream("http://up/", FetchOptions.defaults())) {
      check(stream.head().statusCode() == 200, "status");
      byte[] body = stream.readAllBytes();
      check(body.length == 3000, "read " + body.length);
      check(stream.read() == -1, "read after the end");
    }
    check(fake.streamEnds.take().equals("completed"), "stream end");
  }

  public void testClosingAStreamEarlyCancelsIt() throws Exception {
    startFake(fakeOptions());
    FetchStream stream = client.fetchStream("http://endless/", FetchOptions.defaults());
    check(stream.readNBytes(1500).length == 1500, "read");
    stream.close();
    String end = fake.streamEnds.poll(5, TimeUnit.SECONDS);
    check("cancelled".equals(end), "the server's stream ended " + end);
    try {
      stream.read();
      check(false, "read after close");
    } catch (IOException expected) {
    }
  }

  /** Resolves replicas:///anything to the addresses given. */
  static final class Replicas extends NameResolverProvider {
    final List<EquivalentAddressGroup> addresses = new ArrayList<>();
    @Override protected boolean isAvailable() { return true; }
    @Override protected int priority() { return 5; }
    @Override public String getDefaultScheme() { return "replicas"; }
    @Override public NameResolver newNameResolver(URI target, NameResolver.Args args) {
      if (!"replicas".equals(target.getScheme())) return null;
      return new NameResolver() {
        @Override public String getServiceAuthority() { return "egressd"; }
        @Override public void start(Listener2 listener) {
          listener.onResult(ResolutionResult.newBuilder().setAddresses(addresses).build());
        }
        @Override public void shutdown() {}
      };
    }
  }

  public void testCallsGoRoundRobinOverEveryAddressOfTheTarget() throws Exception {
    FakeEgress[] fakes = {new FakeEgress(), new FakeEgress()};
    Replicas replicas = new Replicas();
    List<Server> servers = new ArrayList<>();
    try {
      for (FakeEgress f : fakes) {
        Server s = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
            .addService(f).build().start();
        servers.add(s);
        replicas.addresses.add(new EquivalentAddressGroup(s.getListenSockets().get(0)));
      }
      NameResolverRegistry.getDefaultRegistry().register(replicas);
      client = EgressClient.create("replicas:///egressd");
      for (int i = 0; i < 10; ++i) client.fetch("http://up/");
      check(!fakes[0].deadlineMillis.isEmpty() && !fakes[1].deadlineMillis.isEmpty(),
            "calls: " + fakes[0].deadlineMillis.size() + " on the first replica, "
            + fakes[1].deadlineMillis.size() + " on the second");
    } finally {
      NameResolverRegistry.getDefaultRegistry().deregister(replicas);
      for (Server s : servers) s.shutdownNow();
    }
  }

  // Against a real egressd.
  static String env(String name) {
    String value = System.getenv(name);
    if (value == null || value.isEmpty()) throw new Skip();
    return value;
  }

  // EGRESS_TEST_TIME_SCALE, which the sanitizer configs set: their egressd runs slower.
  static int timeScale() {
    try {
      return Math.max(1, Integer.parseInt(System.getenv().getOrDefault("EGRESS_TEST_TIME_SCALE", "1")));
    } catch (NumberFormatException e) {
      return 1;
    }
  }

  public void testLiveTheSecondFetchReusesTheConnection() {
    String url = env("EGRESS_TEST_URL");
    client = EgressClient.create(env("EGRESS_TARGET"));
    Response first = client.fetch(url);
    Response second = client.fetch(url);
    check(second.statusCode() == 200 && second.body().length > 0, "status " + second.statusCode());
    check(second.header("Content-Length") != null, "no Content-Length");
    check(second.reused() && second.connectionId() == first.connectionId(), "not reused");
    check(!second.total().isZero(), "no total time");
  }

  public void testLiveAStreamClosedEarlyLeavesAReusableConnection() throws Exception {
    String url = env("EGRESS_TEST_URL");
    client = EgressClient.create(env("EGRESS_TARGET"));
    long id;
    try (FetchStream stream = client.fetchStream(url, FetchOptions.defaults())) {
      check(stream.read() != -1, "no body");
      id = stream.head().connectionId();
    }  // egressd drains the rest
    // The drain ends within its time cap (50 ms by default); after it the connection is
    // the newest idle one, which egressd's pool hands out first. Fetching before that
    // would take (and drain, and return on top) another connection.
    Thread.sleep(300L * timeScale());
    Response next = client.fetch(url);
    check(next.reused() && next.connectionId() == id,
          "the stream's connection " + id + " did not come back: got " + next.connectionId());
  }

  public void testLiveABadUrlIsInvalidArgument() {
    client = EgressClient.create(env("EGRESS_TARGET"));
    try {
      client.fetch("not a url");
      check(false, "no error");
    } catch (EgressException e) {
      check(e.code() == Status.Code.INVALID_ARGUMENT && !e.description().isEmpty(), e.getMessage());
    }
  }

  public void testLiveAPolicyDenialNamesItsReason() {
    String denied = env("EGRESS_TEST_DENIED_URL");
    client = EgressClient.create(env("EGRESS_TARGET"));
    try {
      client.fetch(denied);
      check(false, "no error");
    } catch (EgressException e) {
      check(e.code() == Status.Code.PERMISSION_DENIED && "POLICY_DENIED".equals(e.reason())
            && !e.metadata().getOrDefault("rule", "").isEmpty(), e.getMessage());
    }
  }

  void tearDown() {
    if (client != null) client.close();
    if (server != null) server.shutdownNow();
  }

  public static void main(String[] args) throws Exception {
    int failed = 0;
    for (Method method : EgressClientTest.class.getDeclaredMethods()) {
      if (!method.getName().startsWith("test")) continue;
      EgressClientTest test = new EgressClientTest();
      try {
        method.invoke(test);
        System.out.println("PASS " + method.getName());
      } catch (InvocationTargetException e) {
        if (e.getCause() instanceof Skip) {
          System.out.println("SKIP " + method.getName());
        } else {
          ++failed;
          System.out.println("FAIL " + method.getName() + ": " + e.getCause());
          e.getCause().printStackTrace(System.out);
        }
      } finally {
        test.tearDown();
      }
    }
    System.out.println(failed == 0 ? "OK" : failed + " FAILED");
    System.exit(failed == 0 ? 0 : 1);
  }
}
