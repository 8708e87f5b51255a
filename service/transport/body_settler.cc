#include "service/transport/body_settler.h"

#include <optional>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "service/transport/drain/drain_decision.h"

namespace egress::transport {
namespace {

void Settle(const SettledCallback& settled, const BodySettlement& settlement) {
  if (settled) settled(settlement);
}

}  // namespace

CloseReason CloseReasonOfSkip(DrainSkipReason skip) {
  return skip == DrainSkipReason::kConnectionClose ? CloseReason::kConnectionClose
                                                   : CloseReason::kUnreadBody;
}

std::string StreamOutcome(bool failed, bool reset, bool body_received) {
  if (failed) return "stream_failed";
  if (reset && !body_received) return "reset";
  return "pooled";
}

BodySettler::BodySettler(ConnectionPool& pool, DrainBudget& drain_budget,
                         TransportObserver& observer, DrainSettingsFor drain_settings)
    : pool_(pool),
      drain_budget_(drain_budget),
      observer_(observer),
      drain_settings_(std::move(drain_settings)) {}

void BodySettler::FinishResponse(const std::shared_ptr<Connection>& connection,
                                 SettledCallback settled) {
  const std::optional<CloseReason> verdict = connection->ReuseVerdict();
  if (!verdict) {
    pool_.Return(connection);
    return Settle(settled, {"pooled", 0});
  }
  if (*verdict != CloseReason::kUnreadBody) {
    pool_.Retire(connection, *verdict);
    return Settle(settled, {absl::StrCat("closed:", ToString(*verdict)), 0});
  }

  const Origin& origin = connection->origin();
  // The policy in force when the drain starts, not when the request did.
  const UnreadBody body = connection->unread_body();
  const DrainSettings settings = drain_settings_(origin.host);
  // Only ADAPTIVE decides by cost: the other modes need not take the pool's lock for it.
  DrainDecision decision = DecideDrain(
      settings, body, settings.mode == DrainMode::kAdaptive ? pool_.CostOf(origin) : OriginCost{});
  // A budgeted drain starts with what it will read first: all of a known length.
  const uint64_t reserve = body.remaining_length.value_or(Connection::kDrainReadBytes);
  if (const Drain* drain = std::get_if<Drain>(&decision);
      drain && drain->budgeted && !drain_budget_.TryReserve(reserve)) {
    decision = DrainSkipReason::kOverBudget;
  }
  if (const auto* skip = std::get_if<DrainSkipReason>(&decision)) {
    observer_.OnDrainSkipped(origin, *skip);
    pool_.Retire(connection, CloseReasonOfSkip(*skip));
    return Settle(settled, {absl::StrCat("drain_skipped:", ToString(*skip)), 0});
  }
  const Drain& drain = std::get<Drain>(decision);
  connection->DrainBody(drain, drain.budgeted ? &drain_budget_ : nullptr,
                        drain.budgeted ? reserve : 0,
                        [this, connection, settled = std::move(settled)](
                            const DrainOutcome& outcome) {
                          AfterDrain(connection, outcome, settled);
                        });
}

void BodySettler::FinishCancelled(const std::shared_ptr<Connection>& connection,
                                  const SettledCallback& settled) {
  pool_.Retire(connection, CloseReason::kCancelled);
  Settle(settled, {absl::StrCat("closed:", ToString(CloseReason::kCancelled)), 0});
}

void BodySettler::FinishStream(const std::shared_ptr<Connection>& connection,
                               http2::Stream& stream, bool failed,
                               const SettledCallback& settled) {
  const Origin& origin = connection->origin();
  // Read to its end, or all here but unread (its bytes are dropped; nothing is sent):
  // the connection carries on.
  const bool reset = !failed && !stream.BodyEnded();
  if (reset) stream.Reset();  // gives its place back and buffered bytes up, at once
  std::string outcome = StreamOutcome(failed, reset, reset && stream.BodyReceived());
  if (outcome == "reset") observer_.OnStreamReset(origin);
  observer_.OnStreamClosed(origin);
  pool_.ReturnStream(connection);
  Settle(settled, {std::move(outcome), 0});
}

void BodySettler::AfterDrain(const std::shared_ptr<Connection>& connection,
                             const DrainOutcome& outcome, const SettledCallback& settled) {
  const Origin& origin = connection->origin();
  // Warm: an earlier response on this connection already grew TCP's window.
  observer_.OnOriginCost(origin, pool_.RecordDrain(origin, outcome.bytes, outcome.duration,
                                                   !outcome.abandoned,
                                                   connection->requests() > 1));
  if (outcome.abandoned) {
    pool_.Retire(connection, CloseReason::kDrainAbandoned);
    return Settle(settled, {absl::StrCat("drain_abandoned:", ToString(*outcome.abandoned)),
                            outcome.bytes});
  }
  const std::optional<CloseReason> verdict = connection->ReuseVerdict();
  if (verdict) {
    pool_.Retire(connection, *verdict);
  } else {
    pool_.Return(connection);
  }
  Settle(settled, {"drained", outcome.bytes});
}

}  // namespace egress::transport
