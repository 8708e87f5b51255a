// An example of the Java client: fetches URL twice through egressd (the second fetch
// reuses the upstream connection), then streams it and stops after the first bytes.
//   java -cp "$(cat DIR/classpath)" Example URL [TARGET]
// (client/java/build.sh DIR builds it).
import egress.client.EgressClient;
import egress.client.EgressException;
import egress.client.FetchOptions;
import egress.client.FetchStream;
import egress.client.Response;
import java.time.Duration;

public final class Example {
  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: Example URL [TARGET]");
      System.exit(2);
    }
    String url = args[0];
    String target = args.length > 1 ? args[1] : "127.0.0.1:50051";
    try (EgressClient egress = EgressClient.newBuilder(target).timeout(Duration.ofSeconds(10)).build()) {
      for (int i = 1; i <= 2; ++i) {
        Response r = egress.fetch(url);
        System.out.printf("fetch %d: HTTP %d, %d bytes, Content-Type \"%s\", reused %b, total %s%n",
            i, r.statusCode(), r.body().length, r.header("Content-Type"), r.reused(), r.total());
      }
      Response async = egress.fetchAsync(url, FetchOptions.defaults().headOnly()).get();
      System.out.printf("async: HTTP %d, reused %b%n", async.statusCode(), async.reused());
      try (FetchStream stream = egress.fetchStream(url, FetchOptions.defaults())) {
        byte[] first = stream.readNBytes(16);  // close() then lets egressd drain the rest
        System.out.printf("stream: HTTP %d, first %d bytes%n", stream.head().statusCode(), first.length);
      }
    } catch (EgressException e) {
      System.err.println(e.code() + ": " + e.description() + " (reason " + e.reason() + ")");
      System.exit(1);
    }
  }
}
