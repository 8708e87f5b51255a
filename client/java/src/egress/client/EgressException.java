package egress.client;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import google.rpc.ErrorDetails.ErrorInfo;
import google.rpc.ErrorDetails.RetryInfo;
import google.rpc.StatusOuterClass;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusException;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

/**
 * egressd could not give an HTTP answer. {@link #code()} is the gRPC code
 * (INVALID_ARGUMENT for a bad URL, method or header; PERMISSION_DENIED for the egress
 * policy; UNAVAILABLE when the upstream cannot be reached; DEADLINE_EXCEEDED;
 * RESOURCE_EXHAUSTED for limits), {@link #description()} egressd's words.
 *
 * <p>Why, when egressd said so (google.rpc.ErrorInfo): {@link #reason()}, a stable name
 * such as "POLICY_DENIED", "INVALID_URL" or "CONCURRENCY_LIMIT"; {@link #domain()},
 * "egress.v1"; {@link #metadata()} (for POLICY_DENIED: "rule", "host", "origin" and,
 * when an address rule decided, "address"). Without it (an error gRPC itself made, e.g.
 * no connection or the deadline) reason and domain are null and metadata is empty.
 * {@link #retryDelay()}: how long egressd asks the caller to wait before a retry
 * (google.rpc.RetryInfo), when it sent one.
 */
public final class EgressException extends RuntimeException {
  private static final Metadata.Key<byte[]> STATUS_DETAILS =
      Metadata.Key.of("grpc-status-details-bin", Metadata.BINARY_BYTE_MARSHALLER);

  private final Status.Code code;
  private final String description;
  private final String reason;
  private final String domain;
  private final Map<String, String> metadata;
  private final Duration retryDelay;

  EgressException(Status.Code code, String description, ErrorInfo info, RetryInfo retry,
      Throwable cause) {
    super(code + ": " + description + (info != null ? " [" + info.getReason() + "]" : ""), cause);
    this.code = code;
    this.description = description;
    this.reason = info != null ? info.getReason() : null;
    this.domain = info != null ? info.getDomain() : null;
    this.metadata = info != null ? Collections.unmodifiableMap(new HashMap<>(info.getMetadataMap()))
                                 : Collections.emptyMap();
    this.retryDelay = retry != null && retry.hasRetryDelay()
        ? Duration.ofSeconds(retry.getRetryDelay().getSeconds(), retry.getRetryDelay().getNanos())
        : null;
  }

  /** The EgressException of a failed call, with the ErrorInfo and RetryInfo of the
   *  google.rpc.Status in its grpc-status-details-bin trailer. */
  static EgressException of(Throwable error) {
    if (error instanceof EgressException) return (EgressException) error;
    Status status = Status.fromThrowable(error);
    Metadata trailers = Status.trailersFromThrowable(error);
    ErrorInfo info = null;
    RetryInfo retry = null;
    byte[] details = trailers != null ? trailers.get(STATUS_DETAILS) : null;
    if (details != null) {
      try {
        for (Any detail : StatusOuterClass.Status.parseFrom(details).getDetailsList()) {
          if (detail.is(ErrorInfo.class)) info = detail.unpack(ErrorInfo.class);
          if (detail.is(RetryInfo.class)) retry = detail.unpack(RetryInfo.class);
        }
      } catch (InvalidProtocolBufferException e) {
        // Details left out: the code and the description still say what happened.
      }
    }
    String description = status.getDescription() != null ? status.getDescription() : "";
    return new EgressException(status.getCode(), description, info, retry, error);
  }

  public Status.Code code() { return code; }
  public String description() { return description; }
  /** The ErrorInfo reason, or null. */
  public String reason() { return reason; }
  /** The ErrorInfo domain ("egress.v1"), or null. */
  public String domain() { return domain; }
  public Map<String, String> metadata() { return metadata; }
  public Optional<Duration> retryDelay() { return Optional.ofNullable(retryDelay); }
}
