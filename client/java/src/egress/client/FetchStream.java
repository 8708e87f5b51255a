package egress.client;

import com.google.protobuf.ByteString;
import egress.v1.EgressGrpc;
import egress.v1.EgressOuterClass.FetchChunk;
import egress.v1.EgressOuterClass.FetchRequest;
import io.grpc.Context;
import io.grpc.Status;
import java.io.IOException;
import java.io.InputStream;
import java.util.Iterator;

/**
 * A FetchStream's response: {@link #head()} (status, headers, connection; no body) and
 * the body as this InputStream. A failure while reading is an IOException whose cause is
 * the {@link EgressException}. {@link #close()} before the end cancels the call; egressd
 * then drains the rest of the body in the background. Not thread-safe.
 */
public final class FetchStream extends InputStream {
  private final Context.CancellableContext context;
  private final Iterator<FetchChunk> chunks;
  private final Response head;
  private ByteString pending = ByteString.EMPTY;
  private int offset;
  private boolean ended;
  private boolean closed;

  private FetchStream(Context.CancellableContext context, Iterator<FetchChunk> chunks, Response head) {
    this.context = context;
    this.chunks = chunks;
    this.head = head;
  }

  static FetchStream open(EgressGrpc.EgressBlockingStub stub, FetchRequest request) {
    // The call belongs to a context of its own, so that close() can cancel it.
    Context.CancellableContext context = Context.current().withCancellation();
    Context previous = context.attach();
    try {
      Iterator<FetchChunk> chunks = stub.fetchStream(request);
      if (!chunks.hasNext()) {
        throw new EgressException(Status.Code.INTERNAL, "egressd ended the stream without a head",
                                  null, null, null);
      }
      FetchChunk first = chunks.next();
      if (!first.hasHead()) {
        throw new EgressException(Status.Code.INTERNAL, "egressd sent body bytes before the head",
                                  null, null, null);
      }
      return new FetchStream(context, chunks, new Response(first.getHead()));
    } catch (RuntimeException e) {
      context.cancel(null);
      throw EgressException.of(e);
    } finally {
      context.detach(previous);
    }
  }

  /** Status, headers, connection and timing of the response (its body is this stream). */
  public Response head() { return head; }

  @Override
  public int read() throws IOException {
    byte[] one = new byte[1];
    return read(one, 0, 1) == -1 ? -1 : one[0] & 0xff;
  }

  @Override
  public int read(byte[] buffer, int off, int len) throws IOException {
    if (closed) throw new IOException("read from a closed FetchStream");
    if (len == 0) return 0;
    while (offset == pending.size()) {
      if (ended) return -1;
      try {
        if (!chunks.hasNext()) {
          ended = true;
          context.cancel(null);  // the call is over: this only releases the context
          return -1;
        }
        pending = chunks.next().getBody();
        offset = 0;
      } catch (RuntimeException e) {
        ended = true;
        context.cancel(null);
        EgressException error = EgressException.of(e);
        throw new IOException(error.getMessage(), error);
      }
    }
    int n = Math.min(len, pending.size() - offset);
    pending.substring(offset, offset + n).copyTo(buffer, off);
    offset += n;
    return n;
  }

  @Override
  public int available() { return pending.size() - offset; }

  /** Ends the stream; before the end of the body this cancels the call. */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    context.cancel(null);
  }
}
