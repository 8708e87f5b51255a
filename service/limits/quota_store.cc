#include "service/limits/quota_store.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "service/base/host_port.h"

namespace egress {
namespace {

// KEYS[1]: the bucket; ARGV: rate per second, burst. Returns {1, 0} for a token taken,
// {0, ms} when there is none, ms being the wait for the next one. The bucket is a hash
// of the last refill (ms, Redis's clock) and the tokens then, and expires once it would
// be full again (a full bucket and a missing one are the same).
constexpr char kTakeScript[] = R"lua(
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 't', 'n')
local tokens = burst
if state[1] and state[2] then
  local elapsed = math.max(0, now - tonumber(state[1]))
  tokens = math.min(burst, tonumber(state[2]) + elapsed * rate / 1000)
end
local admitted, wait = 0, 0
if tokens >= 1 then
  tokens = tokens - 1
  admitted = 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 't', now, 'n', tostring(tokens))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + 1000)
return {admitted, wait}
)lua";

// Requests sent in one pipelined batch at most.
constexpr size_t kMaxBatch = 256;

}  // namespace

std::string QuotaStoreSettings::Address() const { return HostPort(host, port); }

RedisQuotaStore::RedisQuotaStore(QuotaStoreSettings settings)
    : settings_(std::move(settings)), thread_([this] { Run(); }) {}

RedisQuotaStore::~RedisQuotaStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  Disconnect();
}

void RedisQuotaStore::Take(std::string key, double rate, double burst, Done done) {
  bool retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_ && !retired_) {
      queue_.push_back(Request{std::move(key), rate, burst, std::move(done)});
      wake_.notify_one();
      return;
    }
    retired = retired_;
  }
  done(absl::UnavailableError(
      retired ? absl::StrCat("the quota store at ", settings_.Address(),
                             " was replaced by a new config's; retry")
              : std::string("egressd is stopping its quota store")));
}

void RedisQuotaStore::Retire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    retired_ = true;
  }
  wake_.notify_all();
}

bool RedisQuotaStore::Busy() {
  std::lock_guard<std::mutex> lock(mu_);
  return serving_ || !queue_.empty();
}

void RedisQuotaStore::Run() {
  std::vector<Request> batch;
  for (;;) {
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      serving_ = false;
      wake_.wait(lock, [&] { return stopping_ || retired_ || !queue_.empty(); });
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      if (batch.empty()) return;  // stopping or retired, and nothing is left to answer
      serving_ = true;
      stopping = stopping_;
    }
    if (stopping) {
      for (Request& r : batch) r.done(absl::UnavailableError("egressd is stopping its quota store"));
    } else {
      Serve(batch);
    }
    batch.clear();
  }
}

void RedisQuotaStore::Serve(std::vector<Request>& batch) {
  absl::Status status = Connect();
  // Every answer is read before any request is answered: what the callers then do
  // (start a fetch) does not eat into the batch's timeout.
  std::vector<absl::StatusOr<QuotaTake>> answers;
  answers.reserve(batch.size());
  if (status.ok()) {
    for (const Request& r : batch) {
      const std::string rate = absl::StrFormat("%.17g", r.rate);
      const std::string burst = absl::StrFormat("%.17g", r.burst);
      redisAppendCommand(redis_, "EVAL %s 1 %b %b %b", kTakeScript, r.key.data(), r.key.size(),
                         rate.data(), rate.size(), burst.data(), burst.size());
    }
    // The whole batch within one timeout: each read waits only for what is left of it
    // (at least a millisecond: a zero socket timeout would mean none at all).
    const absl::Time give_up = absl::Now() + settings_.timeout;
    while (answers.size() < batch.size()) {
      const absl::Duration left = std::max(give_up - absl::Now(), absl::Milliseconds(1));
      void* raw = nullptr;
      if (absl::Now() >= give_up || redisSetTimeout(redis_, absl::ToTimeval(left)) != REDIS_OK ||
          redisGetReply(redis_, &raw) != REDIS_OK) {
        // A timeout reads as "Resource temporarily unavailable". The connection is
        // dropped (its pipeline is out of step) and made again for the next batch.
        status = absl::UnavailableError(absl::StrCat(
            "redis at ", settings_.Address(), " did not answer within ",
            absl::FormatDuration(settings_.timeout),
            redis_->err ? absl::StrCat(": ", redis_->errstr) : ""));
        Disconnect();
        break;
      }
      std::unique_ptr<redisReply, void (*)(void*)> reply(static_cast<redisReply*>(raw),
                                                         freeReplyObject);
      if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
          reply->element[0]->type == REDIS_REPLY_INTEGER &&
          reply->element[1]->type == REDIS_REPLY_INTEGER) {
        QuotaTake take;
        take.admitted = reply->element[0]->integer == 1;
        take.retry_after = absl::Milliseconds(reply->element[1]->integer);
        answers.push_back(take);
      } else {
        const std::string what = reply->type == REDIS_REPLY_ERROR
                                     ? std::string(reply->str, reply->len)
                                     : "an answer that is not the script's";
        answers.push_back(absl::UnavailableError(
            absl::StrCat("redis at ", settings_.Address(), " answered ", what)));
      }
    }
  }
  while (answers.size() < batch.size()) answers.push_back(status);
  for (size_t i = 0; i < batch.size(); ++i) batch[i].done(std::move(answers[i]));
}

absl::Status RedisQuotaStore::Connect() {
  if (redis_) return absl::OkStatus();
  if (absl::Now() < next_connect_) return last_error_;
  redis_ = redisConnectWithTimeout(settings_.host.c_str(), settings_.port,
                                   absl::ToTimeval(settings_.timeout));
  if (redis_ && !redis_->err && redisSetTimeout(redis_, absl::ToTimeval(settings_.timeout)) == REDIS_OK) {
    return absl::OkStatus();
  }
  last_error_ = absl::UnavailableError(
      absl::StrCat("redis at ", settings_.Address(), " cannot be reached: ",
                   redis_ ? redis_->errstr : "out of memory"));
  Disconnect();
  next_connect_ = absl::Now() + absl::Seconds(1);
  return last_error_;
}

void RedisQuotaStore::Disconnect() {
  if (redis_) redisFree(std::exchange(redis_, nullptr));
}

std::shared_ptr<RedisQuotaStore> QuotaStores::For(const QuotaStoreSettings& settings) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!current_ || !(current_->settings() == settings)) {
    if (current_) {
      current_->Retire();
      retired_.push_back(std::move(current_));
    }
    current_ = std::make_shared<RedisQuotaStore>(settings);
  }
  // A retired store with nothing left to answer is joined now (its thread is ending, no
  // I/O to wait for); one still answering a batch at a later call.
  if (!retired_.empty()) {
    retired_.erase(std::remove_if(retired_.begin(), retired_.end(),
                                  [](const auto& store) { return !store->Busy(); }),
                   retired_.end());
  }
  return current_;
}

}  // namespace egress
