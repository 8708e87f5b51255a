package egress.client;

import egress.v1.EgressGrpc;
import egress.v1.EgressOuterClass.FetchRequest;
import egress.v1.EgressOuterClass.FetchResponse;
import io.grpc.Context;
import io.grpc.Deadline;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A caller of egressd's Egress service: blocking {@link #fetch}, {@link #fetchAsync}
 * and {@link #fetchStream}. Every call has a deadline: the options' timeout, else the
 * client's default (30 s unless set); a tighter deadline of the current
 * {@code io.grpc.Context} applies too. An HTTP error status (404, 503) is a
 * {@link Response}; anything that prevented an HTTP answer is an {@link EgressException}.
 * Thread-safe; one client (one channel) per process is the intended use.
 *
 * <pre>
 * try (EgressClient egress = EgressClient.create("127.0.0.1:50051")) {
 *   Response r = egress.fetch("https://api.example.com/v1/items", FetchOptions.defaults().headOnly());
 *   System.out.println(r.statusCode() + " " + r.header("Content-Type") + " " + r.reused());
 * } catch (EgressException e) {
 *   System.err.println(e.code() + " " + e.reason() + " " + e.metadata());
 * }
 * </pre>
 */
public final class EgressClient implements AutoCloseable {
  /** Options of a client. */
  public static final class Builder {
    private final String target;
    private ManagedChannel channel;
    private Duration timeout = Duration.ofSeconds(30);
    private final Metadata metadata = new Metadata();
    private int shutdownRetries = 3;

    private Builder(String target) { this.target = target; }

    /** The deadline of a call whose options set no timeout. */
    public Builder timeout(Duration timeout) {
      this.timeout = timeout;
      return this;
    }

    /** Metadata sent on every call, e.g. ("x-egress-caller", "billing") when egressd
     *  names callers by policy.caller_header. */
    public Builder metadata(String key, String value) {
      metadata.put(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER), value);
      return this;
    }

    /** How many times a fetch (blocking or async) that a stopping egressd turned away is
     *  sent again, to the next replica, within the same deadline: refused (UNAVAILABLE,
     *  reason SHUTTING_DOWN: nothing was sent upstream) or, for a GET, HEAD, OPTIONS or
     *  TRACE (safe to repeat), cancelled (CANCELLED while the caller's io.grpc.Context is
     *  not: gRPC cancels calls that reach a server after its shutdown began) or failed by
     *  a GOAWAY (UNAVAILABLE "GOAWAY shut down transport", as on a connection that reached
     *  its max age). Default 3; 0: none. */
    public Builder shutdownRetries(int retries) {
      this.shutdownRetries = Math.max(retries, 0);
      return this;
    }

    /** A channel of the caller's own (TLS, a load balancing policy, in-process); the
     *  client closes it. Without it the client makes a plaintext Netty channel to the
     *  target. */
    public Builder channel(ManagedChannel channel) {
      this.channel = channel;
      return this;
    }

    public EgressClient build() {
      ManagedChannel ch = channel != null ? channel
          : NettyChannelBuilder.forTarget(target)
                .usePlaintext()
                // Responses of any size: egressd bounds bodies itself (max_body_bytes, at
                // most limits.max_body_bytes_ceiling); gRPC's default of 4 MiB would refuse
                // a FULL body a caller asks for with a maxBodyBytes over egressd's default
                // (4 MiB - 256 KiB).
                .maxInboundMessageSize(Integer.MAX_VALUE)
                // Calls spread over every address the target resolves to (e.g. each
                // replica behind the headless Service egressd-headless), not one. No
                // client-side health checking (the other clients' healthCheckConfig):
                // grpc-java has it in grpc-services, which Debian does not ship; a
                // stopping replica's refusals are retried instead (shutdownRetries).
                .defaultLoadBalancingPolicy("round_robin")
                .build();
      return new EgressClient(ch, timeout, metadata, shutdownRetries);
    }
  }

  private final ManagedChannel channel;
  private final Duration timeout;
  private final EgressGrpc.EgressBlockingStub blocking;
  private final EgressGrpc.EgressStub async;
  private final int shutdownRetries;

  private EgressClient(ManagedChannel channel, Duration timeout, Metadata metadata,
                       int shutdownRetries) {
    this.channel = channel;
    this.timeout = timeout;
    this.shutdownRetries = shutdownRetries;
    this.blocking = EgressGrpc.newBlockingStub(channel)
        .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(metadata));
    this.async = EgressGrpc.newStub(channel)
        .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(metadata));
  }

  /** target: host:port, or any gRPC target, e.g.
   *  dns:///egressd-headless.NAMESPACE.svc.cluster.local:50051 for every ready replica
   *  behind the headless Service egressd-headless (k8s/base/service.yaml). Calls go round robin over all the addresses
   *  the target resolves to; egressd's --grpc_max_connection_age makes the client
   *  re-resolve and reconnect, so it finds replicas that joined. */
  public static Builder newBuilder(String target) { return new Builder(target); }

  public static EgressClient create(String target) { return newBuilder(target).build(); }

  private long deadlineNanos(FetchOptions options) {
    return (options.timeout != null ? options.timeout : timeout).toNanos();
  }

  public Response fetch(String url) { return fetch(url, FetchOptions.defaults()); }

  private static final Set<String> SAFE_TO_REPEAT = Set.of("", "GET", "HEAD", "OPTIONS", "TRACE");

  /** Whether a stopping egressd turned a fetch of `method` away before its GOAWAY reached
   *  the channel (see {@link Builder#shutdownRetries}). */
  static boolean turnedAway(EgressException e, String method, Context caller) {
    if (caller.isCancelled()) return false;  // the caller's own cancellation
    if (e.code() == Status.Code.CANCELLED) return SAFE_TO_REPEAT.contains(method);
    if (e.code() != Status.Code.UNAVAILABLE) return false;
    return "SHUTTING_DOWN".equals(e.reason())
        || (e.description().startsWith(FAILED_BY_GOAWAY) && SAFE_TO_REPEAT.contains(method));
  }

  /** How grpc-java fails a call on a connection the server sent GOAWAY: a stream the
   *  server never saw (its id above the GOAWAY's last stream id, or not yet opened), and
   *  also one it did see, cut when the connection closed after the grace. So only a
   *  request safe to repeat goes again. */
  static final String FAILED_BY_GOAWAY = "GOAWAY shut down transport";

  /** How long to wait before sending a fetch again after `e`, or -1 not to. The first
   *  retry goes at once (round_robin hands it to the next replica); later ones give the
   *  refusing replica's GOAWAY a moment to reach the channel. */
  private long retryPauseMillis(EgressException e, String method, int attempt, Deadline deadline,
                                Context caller) {
    if (attempt >= shutdownRetries || !turnedAway(e, method, caller)) return -1;
    long pause = 10L * attempt;
    return deadline.timeRemaining(TimeUnit.MILLISECONDS) > pause ? pause : -1;
  }

  /** One request through egressd; blocks until the answer. */
  public Response fetch(String url, FetchOptions options) {
    FetchRequest request = options.toRequest(url);
    Deadline deadline = Deadline.after(deadlineNanos(options), TimeUnit.NANOSECONDS);
    for (int attempt = 0; ; ++attempt) {
      EgressException failure;
      try {
        return new Response(blocking.withDeadline(deadline).fetch(request));
      } catch (RuntimeException e) {
        failure = EgressException.of(e);
      }
      long pause = retryPauseMillis(failure, request.getMethod(), attempt, deadline, Context.current());
      if (pause < 0) throw failure;
      if (pause > 0) {
        try {
          Thread.sleep(pause);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw failure;
        }
      }
    }
  }

  /** fetch without blocking: the future fails with an EgressException; cancelling it
   *  cancels the call. */
  public CompletableFuture<Response> fetchAsync(String url, FetchOptions options) {
    CompletableFuture<Response> future = new CompletableFuture<>();
    Context.CancellableContext context = Context.current().withCancellation();
    FetchRequest request = options.toRequest(url);
    Deadline deadline = Deadline.after(deadlineNanos(options), TimeUnit.NANOSECONDS);
    attemptAsync(request, deadline, 0, future, context);
    // Ends the call if the caller cancelled; after an answer it is a no-op.
    future.whenComplete((response, error) -> context.cancel(null));
    return future;
  }

  private void attemptAsync(FetchRequest request, Deadline deadline, int attempt,
                            CompletableFuture<Response> future, Context.CancellableContext context) {
    context.run(() -> async.withDeadline(deadline)
        .fetch(request, new StreamObserver<FetchResponse>() {
          @Override public void onNext(FetchResponse response) {
            future.complete(new Response(response));
          }
          @Override public void onError(Throwable error) {
            EgressException failure = EgressException.of(error);
            long pause = future.isDone() ? -1
                : retryPauseMillis(failure, request.getMethod(), attempt, deadline, context);
            if (pause < 0) {
              future.completeExceptionally(failure);
              return;
            }
            CompletableFuture.delayedExecutor(pause, TimeUnit.MILLISECONDS)
                .execute(() -> attemptAsync(request, deadline, attempt + 1, future, context));
          }
          @Override public void onCompleted() {}
        }));
  }

  /**
   * Starts a streamed request and returns once egressd has sent the head; the body is
   * the stream's bytes. Closing it before the end cancels the call, and egressd drains
   * the rest of the body so the upstream connection can be reused. The deadline bounds
   * the whole stream, body included. Always close it (try-with-resources).
   */
  public FetchStream fetchStream(String url, FetchOptions options) {
    return FetchStream.open(blocking.withDeadlineAfter(deadlineNanos(options), TimeUnit.NANOSECONDS),
                            options.toRequest(url));
  }

  /** Closes the channel; calls in flight fail CANCELLED. */
  @Override
  public void close() {
    channel.shutdownNow();
    try {
      channel.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
