#ifndef EGRESS_SERVICE_DATAPLANE_LOOP_CALLER_SIDE_H_
#define EGRESS_SERVICE_DATAPLANE_LOOP_CALLER_SIDE_H_

// The caller's side of one Fetch or FetchStream call served on an event loop
// (fetch::CallerSide over a ServerSession's stream).

#include <memory>

#include "service/dataplane/server_session.h"
#include "service/fetch/fetch_call.h"
#include "service/fetch/fetch_context.h"

namespace egress::dataplane {

// Starts the Fetch or FetchStream `call` asks for: its FetchCall answers on `session`'s
// stream. A message that is no FetchRequest is answered INVALID_ARGUMENT and counted
// (service.observer). Runs on the session's loop.
void StartFetch(fetch::FetchCall::Rpc rpc, const fetch::Context& service,
                const std::shared_ptr<ServerSession>& session, IncomingCall call);

}  // namespace egress::dataplane

#endif  // EGRESS_SERVICE_DATAPLANE_LOOP_CALLER_SIDE_H_
