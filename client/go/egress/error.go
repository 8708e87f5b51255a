package egress

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is every error of Fetch and FetchStream: egressd could not give an HTTP answer.
// Code is the gRPC code (INVALID_ARGUMENT for a bad URL, method or header;
// PERMISSION_DENIED for the egress policy; UNAVAILABLE when the upstream cannot be
// reached; DEADLINE_EXCEEDED; RESOURCE_EXHAUSTED for limits), Message egressd's words.
//
// Why, when egressd said so (google.rpc.ErrorInfo): Reason, a stable name such as
// "POLICY_DENIED", "INVALID_URL" or "CONCURRENCY_LIMIT"; Domain, "egress.v1"; Metadata
// (for POLICY_DENIED: "rule", "host", "origin" and, when an address rule decided,
// "address"). Without it (an error gRPC itself made, e.g. no connection or the
// caller's deadline) Reason and Domain are "" and Metadata is empty. RetryDelay: how
// long egressd asks the caller to wait before a retry (google.rpc.RetryInfo), 0 when
// it sent none.
type Error struct {
	Code       codes.Code
	Message    string
	Reason     string
	Domain     string
	Metadata   map[string]string
	RetryDelay time.Duration

	status *status.Status
	cause  error // the context's error when the call ended by it
}

func (e *Error) Error() string {
	s := fmt.Sprintf("egress: %s: %s", codeName(e.Code), e.Message)
	if e.Reason != "" {
		s += " [" + e.Reason + "]"
	}
	return s
}

// GRPCStatus makes status.Code(err) and status.FromError(err) see the gRPC status.
func (e *Error) GRPCStatus() *status.Status { return e.status }

// Unwrap gives the context's error (context.Canceled, context.DeadlineExceeded) when
// the call's context had ended by the time the call returned, so that
// errors.Is(err, context.Canceled) holds for a caller that cancelled. At a deadline,
// egressd's own DEADLINE_EXCEEDED can arrive a moment before the context's timer fires:
// test Code == codes.DeadlineExceeded for that.
func (e *Error) Unwrap() error { return e.cause }

// codeName is the code as the gRPC spec spells it (codes.Code's String is CamelCase).
func codeName(c codes.Code) string {
	names := map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
		codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
		codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
		codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
		codes.Unauthenticated: "UNAUTHENTICATED",
	}
	if name, ok := names[c]; ok {
		return name
	}
	return c.String()
}

// CodeName is the error's code as the gRPC spec spells it, e.g. "INVALID_ARGUMENT".
func (e *Error) CodeName() string { return codeName(e.Code) }

// errorOf maps an error of a call made with ctx to an *Error, reading the ErrorInfo and
// RetryInfo of the google.rpc.Status in its grpc-status-details-bin trailer.
func errorOf(ctx context.Context, err error) error {
	var already *Error
	if errors.As(err, &already) {
		return already
	}
	s := status.Convert(err)
	e := &Error{Code: s.Code(), Message: s.Message(), Metadata: map[string]string{}, status: s}
	for _, detail := range s.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			e.Reason, e.Domain = d.GetReason(), d.GetDomain()
			for k, v := range d.GetMetadata() {
				e.Metadata[k] = v
			}
		case *errdetails.RetryInfo:
			e.RetryDelay = d.GetRetryDelay().AsDuration()
		}
	}
	if (e.Code == codes.DeadlineExceeded || e.Code == codes.Canceled) && ctx.Err() != nil {
		e.cause = ctx.Err()
	}
	return e
}
