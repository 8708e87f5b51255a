#include "service/transport/dns/ares_resolver.h"

#include <ares.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/posix/stream_descriptor.hpp"
#include "boost/asio/steady_timer.hpp"

namespace egress::transport {

namespace net = boost::asio;
using error_code = boost::system::error_code;

namespace {

// c-ares asks for this once per process (a no-op on Linux).
void InitAres() {
  static const int status = ares_library_init(ARES_LIB_INIT_ALL);
  (void)status;  // had it failed, ares_init_options fails too, and says so
}

// Who holds an allowance of lookups, as the subject of "already has/have N lookups".
std::string HolderOf(const std::optional<std::string>& caller) {
  if (!caller) return "the pool's own dials already have ";
  if (caller->empty()) return "callers without an identity already have ";
  return absl::StrCat("caller \"", *caller, "\" already has ");
}

// What a failed c-ares lookup means, in the result counter's terms and in words.
std::pair<DnsResult, std::string> Describe(int status) {
  switch (status) {
    case ARES_ENOTFOUND:
      return {DnsResult::kNxdomain, "the name does not exist"};
    case ARES_ENODATA:
      return {DnsResult::kNxdomain, "the name has no address records"};
    case ARES_ETIMEOUT:
      return {DnsResult::kTimeout,
              "the DNS servers did not answer (within resolv.conf's timeout and attempts)"};
    default:
      return {DnsResult::kError, absl::StrCat("c-ares: ", ares_strerror(status))};
  }
}

// The endpoints of an answer, at most `max_per_family` of each family (Query's).
Resolver::Endpoints EndpointsOf(const ares_addrinfo* info, uint16_t port, size_t max_per_family) {
  Resolver::Endpoints endpoints;
  size_t v4 = 0, v6 = 0;
  const auto keep = [&](const net::ip::address& address, size_t& count) {
    if (count == max_per_family) return;
    const net::ip::tcp::endpoint endpoint(address, port);
    if (std::find(endpoints.begin(), endpoints.end(), endpoint) != endpoints.end()) return;
    endpoints.push_back(endpoint);
    ++count;
  };
  for (const ares_addrinfo_node* node = info->nodes; node; node = node->ai_next) {
    if (node->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(node->ai_addr);
      keep(net::ip::address_v4(ntohl(in->sin_addr.s_addr)), v4);
    } else if (node->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(node->ai_addr);
      net::ip::address_v6::bytes_type bytes;
      std::copy(std::begin(in6->sin6_addr.s6_addr), std::end(in6->sin6_addr.s6_addr),
                bytes.begin());
      keep(net::ip::address_v6(bytes, in6->sin6_scope_id), v6);
    }
  }
  return endpoints;
}

// The smallest TTL of the answer's address records and the CNAMEs that led to them.
absl::Duration TtlOf(const ares_addrinfo* info) {
  int ttl = -1;
  const auto lower = [&ttl](int record) { ttl = ttl < 0 ? record : std::min(ttl, record); };
  for (const ares_addrinfo_node* node = info->nodes; node; node = node->ai_next) {
    lower(node->ai_ttl);
  }
  for (const ares_addrinfo_cname* cname = info->cnames; cname; cname = cname->next) {
    lower(cname->ttl);
  }
  return absl::Seconds(std::max(ttl, 0));
}

bool ReadableNow(int fd) {
  pollfd check{fd, POLLIN, 0};
  return ::poll(&check, 1, 0) > 0 && (check.revents & POLLIN);
}

}  // namespace

// One lookup on a channel of its own. Everything runs on the executor it was given (the
// caller's loop); Cancel may come from anywhere and is dispatched there.
class AresResolver::Lookup : public DnsLookup, public std::enable_shared_from_this<Lookup> {
 public:
  Lookup(AresResolver& resolver, Query query, net::any_io_executor executor, Callback done)
      : resolver_(resolver),
        query_(std::move(query)),
        executor_(executor),
        retry_timer_(executor),
        deadline_timer_(executor),
        done_(std::move(done)) {}

  ~Lookup() override {
    if (!done_) return;
    // The io_context went away with the lookup under way: no one is left to tell.
    Stop();
    resolver_.Release(query_.caller, DnsResult::kCancelled);
  }

  void Start(const DnsSettings& settings) {
    if (!done_) return;  // cancelled before it started
    // getaddrinfo takes the inet_aton forms of an IPv4 address ("127.1", "2130706433",
    // "0x7f000001") as that address, and c-ares 1.18 would ask DNS for them: the egress
    // policy must see the address they stand for.
    if (in_addr numeric{}; inet_aton(query_.host.c_str(), &numeric)) {
      return Finish(Endpoints{{net::ip::address_v4(ntohl(numeric.s_addr)), query_.port}},
                    DnsResult::kOk);
    }
    InitAres();
    ares_options options{};
    options.sock_state_cb = &Lookup::OnSocketState;
    options.sock_state_cb_data = this;
    // The name is looked up as written, never through resolv.conf's (or LOCALDOMAIN's)
    // search list: the egress policy judged this name, and "blocked" must not become
    // "blocked.test", a name deny_hosts lists (nor an allowed "api" api.corp.example).
    // c-ares 1.18's ares_getaddrinfo ignores ARES_FLAG_NOSEARCH (later versions heed it);
    // an empty list of domains given here is what keeps it from reading one. Nor through
    // HOSTALIASES (a file of aliases for names without a dot, named by the environment,
    // and read with blocking I/O on this loop): ARES_FLAG_NOALIASES.
    options.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
    options.domains = nullptr;
    options.ndomains = 0;
    ares_channel channel = nullptr;
    if (int status = ares_init_options(&channel, &options,
                                       ARES_OPT_SOCK_STATE_CB | ARES_OPT_FLAGS | ARES_OPT_DOMAINS);
        status != ARES_SUCCESS) {
      return Finish(absl::UnavailableError(absl::StrCat("cannot start the lookup: ",
                                                        ares_strerror(status))),
                    DnsResult::kError);
    }
    channel_ = channel;
    if (!settings.servers.empty()) {
      std::vector<ares_addr_port_node> servers(settings.servers.size());
      for (size_t i = 0; i < servers.size(); ++i) {
        const auto& server = settings.servers[i];
        ares_addr_port_node& node = servers[i];
        node.next = i + 1 < servers.size() ? &servers[i + 1] : nullptr;
        if (server.address().is_v4()) {
          node.family = AF_INET;
          node.addr.addr4.s_addr = htonl(server.address().to_v4().to_uint());
        } else {
          node.family = AF_INET6;
          const auto bytes = server.address().to_v6().to_bytes();
          std::copy(bytes.begin(), bytes.end(), node.addr.addr6._S6_un._S6_u8);
        }
        node.udp_port = node.tcp_port = server.port();
      }
      if (int status = ares_set_servers_ports(channel_, servers.data());
          status != ARES_SUCCESS) {
        return Finish(absl::UnavailableError(absl::StrCat(
                          "cannot use transport.dns.servers: ", ares_strerror(status))),
                      DnsResult::kError);
      }
    }
    if (query_.deadline != absl::InfiniteFuture()) {
      deadline_timer_.expires_after(absl::ToChronoNanoseconds(
          std::max(query_.deadline - absl::Now(), absl::ZeroDuration())));
      deadline_timer_.async_wait([self = shared_from_this()](error_code ec) {
        if (ec) return;  // the lookup ended first
        self->Finish(absl::DeadlineExceededError("the lookup's time ran out"),
                     DnsResult::kTimeout);
      });
    }
    ares_addrinfo_hints hints{};
    hints.ai_family = AF_UNSPEC;
    ares_getaddrinfo(channel_, query_.host.c_str(), nullptr, &hints, &Lookup::OnAnswer, this);
    AfterAres();
  }

  void Cancel() override {
    net::dispatch(executor_, [self = shared_from_this()] {
      self->Finish(absl::CancelledError("the lookup was cancelled"), DnsResult::kCancelled);
    });
  }

 private:
  // A socket c-ares opened, watched for what c-ares wants.
  struct Socket {
    explicit Socket(const net::any_io_executor& executor) : descriptor(executor) {}
    net::posix::stream_descriptor descriptor;
    bool want_read = false, want_write = false;
    bool reading = false, writing = false;  // a wait is pending
  };

  // c-ares's callbacks run inside c-ares calls: they only note what happened, and
  // AfterAres acts on it once c-ares has returned.
  static void OnAnswer(void* arg, int status, int /*timeouts*/, ares_addrinfo* info) {
    auto* self = static_cast<Lookup*>(arg);
    if (status == ARES_SUCCESS) {
      Endpoints endpoints =
          EndpointsOf(info, self->query_.port, self->query_.max_addresses_per_family);
      const absl::Duration ttl = TtlOf(info);
      ares_freeaddrinfo(info);
      if (!endpoints.empty()) {
        self->answer_.emplace(DnsAnswer{std::move(endpoints), DnsResult::kOk, ttl});
        return;
      }
      status = ARES_ENODATA;
    }
    auto [result, why] = Describe(status);
    self->answer_.emplace(DnsAnswer{absl::UnavailableError(why), result});
  }

  static void OnSocketState(void* data, ares_socket_t fd, int readable, int writable) {
    static_cast<Lookup*>(data)->Watch(fd, readable, writable);
  }

  void Watch(int fd, bool readable, bool writable) {
    auto it = sockets_.find(fd);
    if (!readable && !writable) {
      // c-ares closes the socket next: asio lets go of it without closing it.
      if (it != sockets_.end()) {
        it->second->descriptor.release();
        sockets_.erase(it);
      }
      return;
    }
    if (it == sockets_.end()) {
      auto socket = std::make_shared<Socket>(executor_);
      error_code ec;
      socket->descriptor.assign(fd, ec);
      if (ec) {
        if (!answer_) {
          answer_.emplace(DnsAnswer{absl::UnavailableError(absl::StrCat(
                                        "cannot watch the DNS socket: ", ec.message())),
                                    DnsResult::kError});
        }
        return;
      }
      it = sockets_.emplace(fd, std::move(socket)).first;
    }
    it->second->want_read = readable;
    it->second->want_write = writable;
    Arm(fd, it->second);
  }

  void Arm(int fd, const std::shared_ptr<Socket>& socket) {
    if (socket->want_read && !socket->reading) {
      socket->reading = true;
      socket->descriptor.async_wait(
          net::posix::descriptor_base::wait_read,
          [self = shared_from_this(), fd, socket](error_code ec) {
            socket->reading = false;
            self->OnReady(ec, fd, socket, /*read=*/true);
          });
    }
    if (socket->want_write && !socket->writing) {
      socket->writing = true;
      socket->descriptor.async_wait(
          net::posix::descriptor_base::wait_write,
          [self = shared_from_this(), fd, socket](error_code ec) {
            socket->writing = false;
            self->OnReady(ec, fd, socket, /*read=*/false);
          });
    }
  }

  bool IsCurrent(int fd, const std::shared_ptr<Socket>& socket) const {
    const auto it = sockets_.find(fd);
    return it != sockets_.end() && it->second == socket;
  }

  void OnReady(error_code ec, int fd, const std::shared_ptr<Socket>& socket, bool read) {
    if (ec == net::error::operation_aborted) return;  // c-ares closed it, or the lookup ended
    if (ec) {
      return Finish(absl::UnavailableError(
                        absl::StrCat("waiting for the DNS server failed: ", ec.message())),
                    DnsResult::kError);
    }
    if (!IsCurrent(fd, socket)) return;  // ready just as it was let go of
    if (read) {
      // Readiness is edge-triggered and c-ares may leave bytes unread (it reads an
      // answer over TCP in pieces): it is called again while the socket has more.
      for (int pass = 0; pass < kMaxReadPasses; ++pass) {
        ares_process_fd(channel_, fd, ARES_SOCKET_BAD);
        if (answer_ || !IsCurrent(fd, socket) || !ReadableNow(fd)) break;
      }
    } else {
      ares_process_fd(channel_, ARES_SOCKET_BAD, fd);
    }
    AfterAres();
    if (channel_ && IsCurrent(fd, socket)) Arm(fd, socket);
  }

  // After every call into c-ares: ends the lookup on an answer, else sets the timer for
  // c-ares's next retry.
  void AfterAres() {
    if (answer_) {
      DnsAnswer answer = *std::exchange(answer_, std::nullopt);
      return Finish(std::move(answer.endpoints), answer.result, answer.ttl);
    }
    timeval next;
    if (!ares_timeout(channel_, nullptr, &next)) return;  // nothing to retry
    retry_timer_.expires_after(std::chrono::seconds(next.tv_sec) +
                               std::chrono::microseconds(next.tv_usec));
    retry_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || !self->channel_) return;  // set again, or the lookup ended
      ares_process_fd(self->channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
      self->AfterAres();
    });
  }

  void Finish(absl::StatusOr<Endpoints> result, DnsResult how,
              absl::Duration ttl = absl::ZeroDuration()) {
    if (!done_) return;  // it has ended already
    Stop();
    resolver_.Release(query_.caller, how);
    net::post(executor_, [done = std::exchange(done_, nullptr),
                          answer = DnsAnswer{std::move(result), how, ttl}]() mutable {
      done(std::move(answer));
    });
  }

  // Closes the channel and its sockets and stops the timers.
  void Stop() {
    retry_timer_.cancel();
    deadline_timer_.cancel();
    // Reports every socket closed (Watch lets go of them) and answers ARES_EDESTRUCTION.
    if (ares_channel channel = std::exchange(channel_, nullptr)) ares_destroy(channel);
    answer_.reset();
  }

  static constexpr int kMaxReadPasses = 16;

  AresResolver& resolver_;
  const Query query_;
  const net::any_io_executor executor_;
  ares_channel channel_ = nullptr;
  absl::flat_hash_map<int, std::shared_ptr<Socket>> sockets_;
  net::steady_timer retry_timer_;     // c-ares's next retry
  net::steady_timer deadline_timer_;  // the query's deadline
  std::optional<DnsAnswer> answer_;
  Callback done_;  // empty once the lookup has ended
};

AresResolver::AresResolver(TransportObserver& observer) : observer_(observer) {}

std::shared_ptr<DnsLookup> AresResolver::Resolve(Query query, const DnsSettings& settings,
                                                 net::any_io_executor executor,
                                                 Callback done) {
  if (absl::Status refused = Admit(query.caller, settings); !refused.ok()) {
    observer_.OnDnsLookup(DnsResult::kOverLimit);
    net::post(executor, [done = std::move(done), refused] {
      done(DnsAnswer{refused, DnsResult::kOverLimit});
    });
    return nullptr;
  }
  auto lookup = std::make_shared<Lookup>(*this, std::move(query), executor, std::move(done));
  net::post(executor, [lookup, settings] { lookup->Start(settings); });
  return lookup;
}

absl::Status AresResolver::Admit(const std::optional<std::string>& caller,
                                 const DnsSettings& settings) {
  std::lock_guard<std::mutex> lock(mu_);
  if (in_flight_ >= settings.max_lookups) {
    return absl::ResourceExhaustedError(
        absl::StrCat(in_flight_, " name lookups are in flight, the most "
                                 "transport.dns.max_lookups allows"));
  }
  const auto it = in_flight_by_caller_.find(caller);
  const uint32_t mine = it == in_flight_by_caller_.end() ? 0 : it->second;
  if (mine >= settings.max_lookups_per_caller) {
    return absl::ResourceExhaustedError(
        absl::StrCat(HolderOf(caller), mine,
                     " name lookups in flight, the most transport.dns.max_lookups_per_caller "
                     "allows"));
  }
  ++in_flight_by_caller_[caller];
  ++in_flight_;
  return absl::OkStatus();
}

void AresResolver::Release(const std::optional<std::string>& caller, DnsResult result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --in_flight_;
    auto it = in_flight_by_caller_.find(caller);
    if (--it->second == 0) in_flight_by_caller_.erase(it);
  }
  observer_.OnDnsLookup(result);
}

}  // namespace egress::transport
