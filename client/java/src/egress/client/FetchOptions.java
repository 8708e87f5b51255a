package egress.client;

import com.google.protobuf.ByteString;
import egress.v1.EgressOuterClass.BodyMode;
import egress.v1.EgressOuterClass.FetchRequest;
import egress.v1.EgressOuterClass.Header;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/** How to make one request; every setter returns this. */
public final class FetchOptions {
  final FetchRequest.Builder request =
      FetchRequest.newBuilder().setBodyMode(BodyMode.BODY_MODE_FULL);
  Duration timeout;

  public static FetchOptions defaults() { return new FetchOptions(); }

  /** The HTTP method (default GET). */
  public FetchOptions method(String method) {
    request.setMethod(method);
    return this;
  }

  public FetchOptions header(String name, String value) {
    request.addHeaders(Header.newBuilder().setName(name).setValue(value));
    return this;
  }

  /** A header value sent byte for byte (e.g. one that is not UTF-8). */
  public FetchOptions header(String name, byte[] value) {
    request.addHeaders(Header.newBuilder().setName(name).setRawValue(ByteString.copyFrom(value)));
    return this;
  }

  public FetchOptions body(byte[] body) {
    request.setBody(ByteString.copyFrom(body));
    return this;
  }

  public FetchOptions body(String body) { return body(body.getBytes(StandardCharsets.UTF_8)); }

  /** Status and headers only; egressd drains the body in the background. */
  public FetchOptions headOnly() {
    request.setBodyMode(BodyMode.BODY_MODE_NONE);
    return this;
  }

  /** The first n body bytes (Response.bodyTruncated() when there were more). */
  public FetchOptions prefix(long n) {
    request.setBodyMode(BodyMode.BODY_MODE_PREFIX).setMaxBodyBytes(n);
    return this;
  }

  /** A full body larger than n fails RESOURCE_EXHAUSTED (0: egressd's default). */
  public FetchOptions maxBodyBytes(long n) {
    request.setBodyMode(BodyMode.BODY_MODE_FULL).setMaxBodyBytes(n);
    return this;
  }

  public FetchOptions followRedirects() {
    request.setFollowRedirects(true);
    return this;
  }

  /** Bounds the upstream exchange (FetchRequest.timeout) and the call's deadline; without
   *  it the client's default timeout is the deadline. */
  public FetchOptions timeout(Duration timeout) {
    this.timeout = timeout;
    request.setTimeout(com.google.protobuf.Duration.newBuilder()
        .setSeconds(timeout.getSeconds()).setNanos(timeout.getNano()));
    return this;
  }

  /** The FetchRequest these options send for url. */
  public FetchRequest toRequest(String url) { return request.clone().setUrl(url).build(); }
}
