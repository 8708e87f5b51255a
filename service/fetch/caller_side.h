#ifndef EGRESS_SERVICE_FETCH_CALLER_SIDE_H_
#define EGRESS_SERVICE_FETCH_CALLER_SIDE_H_

// The caller's side of one Fetch or FetchStream call, as the call's logic (FetchCall,
// fetch_call.h) sees it: who is calling, and where the answer goes. gRPC's callback
// reactors implement it (fetch_reactor.cc, fetch_stream_reactor.cc); a front end of
// egressd's own implements it next, without touching the call's logic.

#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "egress/v1/egress.pb.h"
#include "grpcpp/support/status.h"

namespace egress::fetch {

// The other direction, the caller side's calls into FetchCall: Cancel when the caller
// cancels, OnSent after each SendHead or SendBody, Done when nothing more comes from the
// caller side (after Finish). FetchCall's methods may run on any thread.
class CallerSide {
 public:
  // Who is calling, asked while the call starts.

  // The peer's address as gRPC names it ("ipv4:10.0.0.7:41234"), for the access log and
  // policy.caller_header_trusted_peers.
  virtual std::string Peer() const = 0;
  // The values the caller sent for metadata `key` (lower case), in order; views into the
  // caller side's own storage, valid for the call.
  virtual absl::InlinedVector<absl::string_view, 1> Metadata(absl::string_view key) const = 0;
  // The name the peer's mTLS client certificate gives under `source` (policy.identity_source);
  // empty when the peer sent no certificate.
  virtual std::string CertificateName(egress::v1::IdentitySource source) const = 0;
  // The caller's deadline; absl::InfiniteFuture() when it set none.
  virtual absl::Time Deadline() const = 0;

  // The answer.

  // The message FetchCall fills with the response: FetchStream's head (everything but
  // the body), Fetch's whole answer (the body included). Kept by the caller side until
  // it is sent.
  virtual egress::v1::FetchResponse& Response() = 0;
  // FetchStream: sends Response() as the stream's first message. FetchCall::OnSent
  // follows (possibly before SendHead returns), once the caller took it or will not.
  virtual void SendHead() = 0;
  // FetchStream: sends the next body bytes, one send at a time; FetchCall::OnSent follows
  // as for SendHead. The caller's pace is the fetch's: no read upstream until then.
  virtual void SendBody(std::string bytes) = 0;
  // Ends the call with `status` (Fetch: with Response() when OK); once.
  virtual void Finish(const grpc::Status& status) = 0;
  // FetchCall is over, on the caller's side and the transport's: the caller side may free
  // itself and the FetchCall, which calls nothing after this.
  virtual void Release() = 0;

 protected:
  ~CallerSide() = default;
};

}  // namespace egress::fetch

#endif  // EGRESS_SERVICE_FETCH_CALLER_SIDE_H_
