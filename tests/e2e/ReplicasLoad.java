// One long-lived EgressClient (one channel, round_robin by default) fetching URL from
// two threads at once until STOP_FILE exists, then one JSON line: {"ok": calls answered
// HTTP 200, "failed": the others, "errors": the first few}. tests/e2e/replicas_test.cc
// tells which replica answered from each replica's metrics (the URL's host names the
// language). Runs as a source file, on the class path client/java/build.sh DIR writes:
//   java -cp "$(cat DIR/classpath)" -Dnetworkaddress.cache.ttl=0 -Dsun.net.inetaddr.ttl=0 \
//     ReplicasLoad.java TARGET URL STOP_FILE
// The two properties: grpc-java's DNS resolver (and the JVM's InetAddress cache) keep an
// answer 30 s by default, during which a GOAWAY from a replica's connection age does not
// re-resolve; the other languages' load clients lower the same floor to 0.5 s through
// their channel options.
import egress.client.EgressClient;
import egress.client.EgressException;
import egress.client.FetchOptions;
import egress.client.Response;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.time.LocalTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;

public final class ReplicasLoad {
  static int ok = 0;
  static int failed = 0;
  static final List<String> errors = new ArrayList<>();

  static synchronized void count(String error) {
    if (error == null) {
      ++ok;
    } else {
      ++failed;
      if (errors.size() < 5) errors.add(LocalTime.now(ZoneOffset.UTC) + " " + error);
    }
  }

  static String quote(String s) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') out.append('\\').append(c);
      else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
      else out.append(c);
    }
    return out.append('"').toString();
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: ReplicasLoad.java TARGET URL STOP_FILE");
      System.exit(2);
    }
    String target = args[0], url = args[1];
    Path stopFile = Paths.get(args[2]);
    try (EgressClient egress =
             EgressClient.newBuilder(target).timeout(Duration.ofSeconds(10)).build()) {
      Runnable loop = () -> {
        while (!Files.exists(stopFile)) {
          try {
            Response r = egress.fetch(url, FetchOptions.defaults().headOnly());
            count(r.statusCode() == 200 ? null : "HTTP " + r.statusCode());
          } catch (EgressException e) {
            count(e.getMessage());
          }
          try {
            Thread.sleep(5);  // a steady load, not a benchmark
          } catch (InterruptedException e) {
            return;
          }
        }
      };
      Thread[] threads = {new Thread(loop), new Thread(loop)};
      for (Thread t : threads) t.start();
      for (Thread t : threads) t.join();
    }
    StringBuilder list = new StringBuilder("[");
    synchronized (ReplicasLoad.class) {
      for (String e : errors) list.append(list.length() > 1 ? ", " : "").append(quote(e));
      System.out.println("{\"ok\": " + ok + ", \"failed\": " + failed + ", \"errors\": " + list + "]}");
    }
  }
}
