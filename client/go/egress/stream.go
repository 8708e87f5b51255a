package egress

import (
	"context"
	"errors"
	"io"

	"egress.internal/client/egress/egressv1"

	"google.golang.org/grpc/codes"
)

// Stream is a FetchStream's response: the head (status, headers, connection, timing;
// Body empty) and the body as an io.ReadCloser. Close before the end cancels the call;
// egressd then drains the rest of the body in the background, so the upstream
// connection can be reused. Not safe for concurrent use.
type Stream struct {
	*Response
	ctx     context.Context
	cancel  context.CancelFunc
	chunks  egressv1.Egress_FetchStreamClient
	pending []byte
	err     error // sticky: io.EOF at the end, an *Error on failure, errClosed after Close
}

var errClosed = errors.New("egress: read from a closed Stream")

// FetchStream starts the request and returns once egressd has sent the head. The
// context (and Timeout, or the client's default when ctx has no deadline) bounds the
// whole stream, body included. Always Close the Stream.
func (c *Client) FetchStream(ctx context.Context, url string, opts ...FetchOption) (*Stream, error) {
	f := configure(url, opts)
	ctx, cancel := c.callContext(ctx, f)
	chunks, err := c.stub.FetchStream(ctx, f.request)
	if err != nil {
		cancel()
		return nil, errorOf(ctx, err)
	}
	first, err := chunks.Recv()
	if err == io.EOF {
		cancel()
		return nil, &Error{Code: codes.Internal, Message: "egressd ended the stream without a head"}
	}
	if err != nil {
		cancel()
		return nil, errorOf(ctx, err)
	}
	head := first.GetHead()
	if head == nil {
		cancel()
		return nil, &Error{Code: codes.Internal, Message: "egressd sent body bytes before the head"}
	}
	return &Stream{Response: responseOf(head), ctx: ctx, cancel: cancel, chunks: chunks}, nil
}

// Read reads body bytes; io.EOF at the end of the body, an *Error when the stream
// failed.
func (s *Stream) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		chunk, err := s.chunks.Recv()
		switch {
		case err == io.EOF:
			s.err = io.EOF
			s.cancel() // the call is over; releases the context's timer
		case err != nil:
			s.err = errorOf(s.ctx, err)
			s.cancel()
		default:
			s.pending = chunk.GetBody()
		}
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// Close ends the stream. Before the end of the body it cancels the call, which tells
// egressd to stop sending and leave the rest of the body to auto-drain. Always nil.
func (s *Stream) Close() error {
	s.cancel()
	if s.err == nil || s.err == io.EOF {
		s.err = errClosed
	}
	s.pending = nil
	return nil
}
