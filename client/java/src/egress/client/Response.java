package egress.client;

import egress.v1.EgressOuterClass.FetchResponse;
import egress.v1.EgressOuterClass.Header;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/** The answer of a fetch (an HTTP error status included), or the head of a stream. */
public final class Response {
  private final FetchResponse raw;
  private final List<Map.Entry<String, String>> headers;

  Response(FetchResponse raw) {
    this.raw = raw;
    List<Map.Entry<String, String>> received = new ArrayList<>();
    for (Header h : raw.getHeadersList()) received.add(Map.entry(h.getName(), text(h)));
    this.headers = Collections.unmodifiableList(received);
  }

  public int statusCode() { return raw.getStatusCode(); }
  /** (name, value) pairs in the order received. */
  public List<Map.Entry<String, String>> headers() { return headers; }

  /** The first value of header name (case-insensitive), or null. A value that is not
   *  UTF-8 comes as its bytes read as ISO-8859-1: one character per byte. */
  public String header(String name) {
    for (Map.Entry<String, String> h : headers) {
      if (h.getKey().equalsIgnoreCase(name)) return h.getValue();
    }
    return null;
  }

  /** The same value exactly as the upstream sent it, or null. */
  public byte[] headerBytes(String name) {
    for (Header h : raw.getHeadersList()) {
      if (h.getName().equalsIgnoreCase(name)) {
        return h.getRawValue().isEmpty() ? h.getValue().getBytes(StandardCharsets.UTF_8)
                                           : h.getRawValue().toByteArray();
      }
    }
    return null;
  }

  public byte[] body() { return raw.getBody().toByteArray(); }
  public boolean bodyTruncated() { return raw.getBodyTruncated(); }
  /** The upstream connection had carried an earlier request. */
  public boolean reused() { return raw.getConnection().getReused(); }
  public long connectionId() { return raw.getConnection().getConnectionId(); }
  public String remoteAddress() { return raw.getConnection().getRemoteAddress(); }
  public Duration idleTime() { return duration(raw.getConnection().getIdleTime()); }
  /** Time to first byte and total time of the upstream exchange. */
  public Duration timeToFirstByte() { return duration(raw.getTiming().getTimeToFirstByte()); }
  public Duration total() { return duration(raw.getTiming().getTotal()); }
  /** Everything else: DNS, connect and TLS timings, trace ids. */
  public FetchResponse raw() { return raw; }

  private static Duration duration(com.google.protobuf.Duration d) {
    return Duration.ofSeconds(d.getSeconds(), d.getNanos());
  }

  private static String text(Header h) {
    if (h.getRawValue().isEmpty()) return h.getValue();
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .decode(ByteBuffer.wrap(h.getRawValue().toByteArray())).toString();
    } catch (CharacterCodingException e) {
      return new String(h.getRawValue().toByteArray(), StandardCharsets.ISO_8859_1);
    }
  }
}
