// Calls egressd through client/java twice for URL, then once for a malformed URL, once
// for LARGE_URL (a body over gRPC's default message limit) and once for DENIED_URL (which
// egressd's policy denies); prints one JSON object per call for
// tests/e2e/clients_test.cc to check. Runs as a source file, on the class path
// client/java/build.sh DIR writes to DIR/classpath:
//   java -cp "$(cat DIR/classpath)" CheckJava.java TARGET URL LARGE_URL DENIED_URL
import egress.client.EgressClient;
import egress.client.EgressException;
import egress.client.FetchOptions;
import egress.client.Response;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;

public final class CheckJava {
  static String quote(Object value) {
    if (value == null) return "null";
    if (value instanceof Boolean || value instanceof Integer) return value.toString();
    StringBuilder out = new StringBuilder("\"");
    for (char c : value.toString().toCharArray()) {
      if (c == '"' || c == '\\') out.append('\\').append(c);
      else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
      else out.append(c);
    }
    return out.append('"').toString();
  }

  static void print(Map<String, Object> object) {
    StringBuilder line = new StringBuilder("{");
    for (Map.Entry<String, Object> e : object.entrySet()) {
      if (line.length() > 1) line.append(", ");
      line.append(quote(e.getKey())).append(": ").append(quote(e.getValue()));
    }
    System.out.println(line.append('}'));
  }

  // An EgressException as the test reads it: the code, the message, the ErrorInfo.
  static Map<String, Object> failure(EgressException e) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("error", e.code().name());
    m.put("message", e.description());
    m.put("reason", e.reason());
    m.put("domain", e.domain());
    m.put("rule", e.metadata().get("rule"));
    m.put("host", e.metadata().get("host"));
    return m;
  }

  static Map<String, Object> none() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("error", "none");
    return m;
  }

  public static void main(String[] args) {
    String target = args[0], url = args[1], largeUrl = args[2], deniedUrl = args[3];
    try (EgressClient egress = EgressClient.create(target)) {
      for (int i = 0; i < 2; ++i) {
        Response r = egress.fetch(url);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("status", r.statusCode());
        m.put("content_length", r.header("Content-Length"));
        m.put("body", Base64.getEncoder().encodeToString(r.body()));
        m.put("reused", r.reused());
        m.put("connection_id", Long.toUnsignedString(r.connectionId()));
        print(m);
      }
      try {
        egress.fetch("not a url");
        print(none());
      } catch (EgressException e) {
        print(failure(e));
      }
      try {
        // Over egressd's default max_body_bytes: the client's receive limit must allow it.
        Response r = egress.fetch(largeUrl, FetchOptions.defaults().maxBodyBytes(8L << 20));
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("large_status", r.statusCode());
        m.put("large_bytes", String.valueOf(r.body().length));
        print(m);
      } catch (EgressException e) {
        print(failure(e));
      }
      try {
        egress.fetch(deniedUrl);
        print(none());
      } catch (EgressException e) {
        print(failure(e));
      }
    }
  }
}
