#ifndef EGRESS_SERVICE_FETCH_ARENA_MESSAGES_H_
#define EGRESS_SERVICE_FETCH_ARENA_MESSAGES_H_

#include "grpcpp/support/message_allocator.h"
#include "service/fetch/inline_arena.h"

namespace egress {

// A gRPC message allocator for a unary callback method that puts each call's request
// and response on one InlineArena, freed when gRPC releases the call. Thread-safe: it
// keeps no state.
template <class Request, class Response>
class ArenaMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder; }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() {
      this->set_request(&arena_.template Create<Request>());
      this->set_response(&arena_.template Create<Response>());
    }
    void Release() override { delete this; }

   private:
    // Room for a request and a response with a dozen headers.
    InlineArena<2048> arena_;
  };
};

}  // namespace egress

#endif  // EGRESS_SERVICE_FETCH_ARENA_MESSAGES_H_
