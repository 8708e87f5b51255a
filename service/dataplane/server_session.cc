#include "service/dataplane/server_session.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/buffer.hpp"
#include "boost/asio/write.hpp"
#include "service/base/error_reason.h"
#include "service/base/host_port.h"
#include "service/fetch/status_mapping.h"
#include "service/transport/policy/address_policy.h"

namespace egress::dataplane {
namespace {

namespace net = boost::asio;

// Room made for a call's metadata at once: what gRPC clients send (content-type, te,
// user-agent, grpc-accept-encoding and a few of the caller's own) without growing.
constexpr size_t kTypicalMetadataEntries = 8;

absl::string_view View(const uint8_t* bytes, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(bytes), size);
}

nghttp2_nv Field(const std::string& name, const std::string& value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(), NGHTTP2_NV_FLAG_NONE};
}

// nghttp2 copies the fields it is given: `fields` need live only for the call.
std::vector<nghttp2_nv> Fields(const Metadata& fields) {
  std::vector<nghttp2_nv> nv;
  nv.reserve(fields.size());
  for (const auto& [name, value] : fields) nv.push_back(Field(name, value));
  return nv;
}

std::string PeerName(const boost::asio::ip::tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  return absl::StrCat(address.is_v4() ? "ipv4:" : "ipv6:",
                      HostPort(transport::AddressText(address), endpoint.port()));
}

ServerSession& Of(void* self) { return *static_cast<ServerSession*>(self); }

}  // namespace

ServerSession::ServerSession(CallerStream socket, Methods& methods, const SessionLimits& limits,
                             FetchObserver& observer)
    : socket_(std::move(socket)),
      methods_(methods),
      limits_(limits),
      observer_(observer),
      write_watch_(socket_.get_executor()),
      guard_(limits.caller, observer),
      preface_timer_(socket_.get_executor()),
      lifecycle_(socket_.get_executor()) {
  nghttp2_session_callbacks* callbacks;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, OnBeginFrame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, OnData);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, OnFrame);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, OnStreamClose);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, OnInvalidFrame);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, OnFrameSent);
  auto options = ServerOptions(limits.caller);
  // Window goes back as Consume decides, so that a connection takes in at most its bound
  // of request bytes still arriving (SessionLimits::max_buffered_messages).
  nghttp2_option_set_no_auto_window_update(options.get(), 1);
  nghttp2_session_server_new2(&session_, callbacks, this, options.get());
  nghttp2_session_callbacks_del(callbacks);
}

ServerSession::~ServerSession() { nghttp2_session_del(session_); }

void ServerSession::Start() {
  boost::system::error_code ec;
  const auto remote = socket_.remote_endpoint(ec);
  if (ec) return End();  // the caller left before its first byte
  peer_ = PeerName(remote);
  lifecycle_.Start(session_, limits_.lifetime, weak_from_this(),
                   {[this] { Flush(); }, [this] { End(); }});
  socket_.set_option(boost::asio::ip::tcp::no_delay(true), ec);  // best effort: latency only
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits_.max_header_list_bytes},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  preface_timer_.expires_after(absl::ToChronoNanoseconds(limits_.caller.preface_timeout));
  preface_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->ended_) return;  // the caller's SETTINGS came (or the connection went)
    self->guard_.Refuse(CallRefusal::kPrefaceTimeout);
    self->End();
  });
  const auto evicted = [weak = weak_from_this()](CallRefusal reason) {
    auto self = weak.lock();
    if (!self || self->ended_) return;
    self->guard_.Refuse(reason);
    if (reason == CallRefusal::kIdleEvicted) return self->EndIdle();
    self->End();
  };
  if (!slot_.EvictWith([evicted, loop = executor()](CallRefusal reason) {
        net::post(loop, [evicted, reason] { evicted(reason); });
      })) {
    return evicted(CallRefusal::kPrefaceEvicted);  // while its TLS handshake finished
  }
  Flush();
  Read();
}

void ServerSession::Read() {
  socket_.async_read_some(
      net::buffer(input_), [self = shared_from_this()](boost::system::error_code ec, size_t got) {
        if (ec) return self->End();  // the caller went away, or End closed the socket
        self->receiving_ = true;
        const ssize_t taken = nghttp2_session_mem_recv(
            self->session_, reinterpret_cast<const uint8_t*>(self->input_.data()), got);
        self->receiving_ = false;
        self->lifecycle_.SendRefusals();
        if (taken < 0) {
          // nghttp2 has queued its GOAWAY where it could; the connection is over.
          self->guard_.OnReceiveError(static_cast<int>(taken));
          self->Flush();
          return self->End();
        }
        self->Flush();
        if (!self->ended_) self->ReadUnlessBacklogged();
      });
}

void ServerSession::Flush() {
  if (writing_ || receiving_ || ended_) return;
  output_.clear();
  const uint8_t* data;
  ssize_t size;
  // At most about kMaxWriteBytes a write: a write's end is the progress EndIfWriteStuck
  // watches for, and a slow caller must show some within its grace.
  while (output_.size() < kMaxWriteBytes &&
         (size = nghttp2_session_mem_send(session_, &data)) > 0) {
    output_.append(reinterpret_cast<const char*>(data), size);
  }
  if (output_.empty()) {
    if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) End();
    return;
  }
  writing_ = true;
  net::async_write(socket_, net::buffer(output_),
                   [self = shared_from_this()](boost::system::error_code ec, size_t) {
                     self->writing_ = false;
                     ++self->writes_done_;
                     if (ec) return self->End();
                     self->Flush();
                     if (std::exchange(self->read_paused_, false)) self->ReadUnlessBacklogged();
                   });
}

// What the caller sends makes frames to send back (acknowledgements, resets, refusals):
// a caller that reads none of them while it keeps sending would grow that queue without
// bound. Past kMaxQueuedFrames, with a write waiting for the caller, reading stops until
// the write ends; TCP then holds the caller back.
void ServerSession::ReadUnlessBacklogged() {
  if (writing_ && nghttp2_session_get_outbound_queue_size(session_) > kMaxQueuedFrames) {
    read_paused_ = true;
    return;
  }
  Read();
}

// The connection is over: every call not yet answered learns it, as of a reset.
void ServerSession::End() {
  if (ended_) return;
  ended_ = true;
  boost::system::error_code ignored;  // closing a socket the caller already closed
  socket_.close(ignored);
  slot_ = ConnectionSlot();  // its descriptor is closed: the slot serves the next caller
  preface_timer_.cancel();
  write_watch_.cancel();
  lifecycle_.Stop();
  auto streams = std::move(streams_);
  for (auto& [id, stream] : streams) Gone(stream);
  if (on_end_) std::exchange(on_end_, nullptr)();
}

void ServerSession::OnEnd(std::function<void()> on_end) {
  if (ended_) return on_end();
  on_end_ = std::move(on_end);
}

// A call that has finished learns nothing more: its stream ended as it should.
void ServerSession::Gone(Stream& stream) {
  Unbuffer(stream);
  if (stream.watcher && !stream.answered) stream.watcher->OnStreamReset();
  if (stream.on_taken) {
    Cancelled(std::move(stream.on_taken),
              stream.reset.ok() ? absl::CancelledError("the caller went away") : stream.reset);
  }
  if (stream.on_finished) net::post(executor(), std::move(stream.on_finished));
}

void ServerSession::Cancelled(OnTaken on_taken, absl::Status why) {
  net::post(executor(), [on_taken = std::move(on_taken), why = std::move(why)] {
    on_taken(why);
  });
}

ServerSession::Stream* ServerSession::Find(int32_t stream_id) {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : &it->second;
}

// A stream opened after the final GOAWAY is refused, and counted: nghttp2 would drop it
// unanswered, which a caller would learn only from the GOAWAY's last stream id.
int ServerSession::OnBeginFrame(nghttp2_session*, const nghttp2_frame_hd* hd, void* self) {
  ServerSession& session = Of(self);
  session.guard_.OnBeginFrame(*hd);
  if (hd->type == NGHTTP2_HEADERS && (hd->stream_id & 1) && !session.Find(hd->stream_id) &&
      !session.lifecycle_.Admits(hd->stream_id)) {
    session.observer_.OnCallRefused(CallRefusal::kAfterGoAway);
  }
  return 0;
}

int ServerSession::OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* self) {
  ServerSession& session = Of(self);
  // A stream past the final GOAWAY (it may come in the same read as the PING's ACK that
  // sent it) gets no Stream, so nothing starts: it is only refused (SendRefusals).
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST &&
      session.lifecycle_.Serves(frame->hd.stream_id)) {
    auto& stream = session.streams_.try_emplace(frame->hd.stream_id,
                                                session.limits_.max_message_bytes,
                                                session.executor())
                       .first->second;
    stream.call.stream_id = frame->hd.stream_id;
    stream.call.metadata.reserve(kTypicalMetadataEntries);
  }
  return 0;
}

int ServerSession::OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                            size_t name_size, const uint8_t* value, size_t value_size, uint8_t,
                            void* self) {
  ServerSession& session = Of(self);
  Stream* stream = session.Find(frame->hd.stream_id);
  // The caller's trailers (a request has none that matter) and refused requests: ignored.
  if (!stream || frame->headers.cat != NGHTTP2_HCAT_REQUEST || !stream->refusal.ok()) return 0;
  stream->header_bytes += name_size + value_size + 32;
  if (stream->header_bytes > session.limits_.max_header_list_bytes) {
    session.observer_.OnCallRefused(CallRefusal::kMetadataTooLarge);
    stream->refusal = transport::WithReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "the call's metadata is larger than egressd accepts (",
            session.limits_.max_header_list_bytes, " bytes, as HTTP/2 counts a header list)")),
        "METADATA_TOO_LARGE");
    stream->call.metadata.clear();
    return 0;
  }
  const absl::string_view field = View(name, name_size);
  const absl::string_view text = View(value, value_size);
  if (field == ":path") {
    stream->call.path = std::string(text);
  } else if (field == "grpc-timeout") {
    const auto timeout = ParseGrpcTimeout(text);
    if (!timeout.ok()) {
      session.observer_.OnCallRefused(CallRefusal::kBadTimeout);
      stream->refusal = timeout.status();
      return 0;
    }
    stream->call.deadline = absl::Now() + *timeout;
  } else if (!absl::StartsWith(field, ":")) {
    std::string decoded(text);
    // UNAVAILABLE, as gRPC's library server (C-core 1.51) answers it ("Failed parsing
    // HTTP/2"); grpc-go answers INTERNAL.
    if (absl::EndsWith(field, "-bin") && !absl::Base64Unescape(text, &decoded)) {
      session.observer_.OnCallRefused(CallRefusal::kBadMetadata);
      stream->refusal = transport::WithReason(
          absl::UnavailableError(absl::StrCat("the value of metadata \"", field.substr(0, 64),
                                              "\" is not base64, as a -bin value must be")),
          "MALFORMED_BINARY_METADATA");
      stream->call.metadata.clear();
      return 0;
    }
    stream->call.metadata.emplace_back(std::string(field), std::move(decoded));
  }
  return 0;
}

int ServerSession::OnData(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data,
                          size_t size, void* self) {
  ServerSession& session = Of(self);
  // The connection's window goes back at once: each stream's own bounds what it sends.
  nghttp2_session_consume_connection(session.session_, size);
  Stream* stream = session.Find(stream_id);
  if (!stream || stream->answered) return 0;  // a refused request's bytes are dropped
  if (stream->streams_requests) {
    session.Receive(stream_id, *stream, View(data, size));
    return 0;
  }
  if (absl::Status status = stream->reader.Append(View(data, size)); !status.ok()) {
    session.observer_.OnCallRefused(CallRefusal::kBadRequestMessage);
    session.Refuse(stream_id, *stream, status);
    return 0;
  }
  session.Consume(stream_id, *stream, size);
  return 0;
}

int ServerSession::OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* self) {
  ServerSession& session = Of(self);
  if (frame->hd.type == NGHTTP2_PING && (frame->hd.flags & NGHTTP2_FLAG_ACK)) {
    session.lifecycle_.OnPingAck(*frame);
  } else if (frame->hd.type == NGHTTP2_PING &&
             !session.lifecycle_.AcceptsPing(!session.streams_.empty())) {
    // gRPC's keepalive enforcement: GOAWAY, and the calls end with the connection.
    session.guard_.Refuse(CallRefusal::kTooManyPings);  // once: its GOAWAY is this
    session.lifecycle_.TooManyPings();
    for (const auto& [id, stream] : session.streams_) {
      nghttp2_submit_rst_stream(session.session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    }
  }
  const int32_t stream_id = frame->hd.stream_id;
  Stream* stream = session.Find(stream_id);
  if (frame->hd.type == NGHTTP2_SETTINGS) {
    session.preface_timer_.cancel();
    session.slot_.Proven();
  }
  // A stream reset before its answer is all sent (it is closed once it is).
  if (frame->hd.type == NGHTTP2_RST_STREAM && stream && !session.guard_.TakeReset()) {
    nghttp2_session_terminate_session(session.session_, NGHTTP2_ENHANCE_YOUR_CALM);
  }
  if (!stream) return 0;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    session.OnRequestHeaders(stream_id, *stream);
  }
  const bool request_ends = (frame->hd.type == NGHTTP2_DATA ||
                             frame->hd.type == NGHTTP2_HEADERS) &&
                            (frame->hd.flags & NGHTTP2_FLAG_END_STREAM);
  if (request_ends && !stream->answered) session.OnRequestEnd(stream_id, *stream);
  return 0;
}

// What the headers alone decide is answered at once: the rest of the request is not
// waited for.
void ServerSession::OnRequestHeaders(int32_t stream_id, Stream& stream) {
  if (!stream.refusal.ok()) return Refuse(stream_id, stream, stream.refusal);
  if (!methods_.Serves(stream.call.path)) {
    observer_.OnCallRefused(CallRefusal::kUnimplemented);
    return Refuse(stream_id, stream,
                  transport::WithReason(
                      absl::UnimplementedError(absl::StrCat(
                          "egressd serves no method ",
                          absl::string_view(stream.call.path).substr(0, kQuotedBytes))),
                      "METHOD_NOT_FOUND"));
  }
  const absl::Duration left =
      std::min(stream.call.deadline - absl::Now(), limits_.max_call_time);
  stream.deadline.expires_after(absl::ToChronoNanoseconds(std::max(left, absl::ZeroDuration())));
  stream.deadline.async_wait([self = shared_from_this(), stream_id](boost::system::error_code ec) {
    if (!ec) self->OnDeadline(stream_id);  // else the stream went first
  });
  if (methods_.StreamsRequests(stream.call.path)) {
    stream.streams_requests = true;
    StartCall(stream);
  }
}

void ServerSession::OnRequestEnd(int32_t stream_id, Stream& stream) {
  if (stream.streams_requests) {
    if (stream.next_message_at != stream.unread.size()) {
      observer_.OnCallRefused(CallRefusal::kBadRequestMessage);
      return Refuse(stream_id, stream,
                    transport::WithReason(
                        absl::InvalidArgumentError(
                            "the request ended inside a message: its last bytes are not one "
                            "whole length-prefixed message"),
                        "REQUEST_MESSAGE_INCOMPLETE"));
    }
    stream.requests_ended = true;
    return Deliver(stream_id, stream);
  }
  auto message = stream.reader.Take();
  if (!message.ok()) {
    observer_.OnCallRefused(CallRefusal::kBadRequestMessage);
    return Refuse(stream_id, stream, message.status());
  }
  stream.call.message = *std::move(message);
  Unbuffer(stream);
  StartCall(stream);
}

void ServerSession::StartCall(Stream& stream) {
  stream.started = true;
  if (calls_started_++ == 0) CallsOpen(true);
  methods_.Start(shared_from_this(), std::move(stream.call));
}

void ServerSession::CallsOpen(bool open) {
  slot_.CallsOpen(open);
  lifecycle_.CallsOpen(open);
}

// Idle when the ledger chose it: a GOAWAY that names the last stream taken, so that a call
// on its way is retried elsewhere, then the close. A call that started since (the ledger
// looked from another thread) finishes within kEvictedCallsGrace first.
void ServerSession::EndIdle() {
  if (calls_started_ > 0) return GoAway(kEvictedCallsGrace, "idle_evicted");
  nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
  Flush();
}

void ServerSession::Refuse(int32_t stream_id, Stream& stream, const absl::Status& status) {
  Unbuffer(stream);
  if (stream.answered) return;
  // A streamed call's method has the call already: it learns of the refusal as of a reset
  // (server_session_fuzzer: a bad second message left a watched call never told).
  if (stream.started && stream.watcher) stream.watcher->OnStreamReset();
  Answer(stream_id, std::nullopt, ToGrpcStatus(status));
}

void ServerSession::Answer(int32_t stream_id, std::optional<std::string> message,
                           const grpc::Status& status, OnFinished on_finished) {
  // The message is queued, not written: Finish writes it with the trailers, so that the
  // whole answer (HEADERS, DATA, trailers) goes in one write when the window allows.
  OnTaken none;
  if (message) Queue(stream_id, *std::move(message), none);
  Finish(stream_id, status, std::move(on_finished));
}

void ServerSession::Send(int32_t stream_id, std::string message, OnTaken on_taken) {
  if (!Queue(stream_id, std::move(message), on_taken)) {
    if (on_taken) Cancelled(std::move(on_taken), absl::CancelledError("the caller went away"));
    return;
  }
  Flush();
}

bool ServerSession::Queue(int32_t stream_id, std::string message, OnTaken& on_taken) {
  Stream* stream = Find(stream_id);
  if (!stream || stream->answered || ended_) return false;
  stream->pending = OutgoingMessage(std::move(message));
  stream->on_taken = std::move(on_taken);
  if (!stream->head_sent) {
    stream->head_sent = true;
    // Made once (and never freed, as static objects here are): every answer with a
    // message starts with them.
    static const auto* head =
        new Metadata{{":status", "200"}, {"content-type", "application/grpc"}};
    static const auto* head_fields = new std::vector<nghttp2_nv>(Fields(*head));
    nghttp2_data_provider body;
    body.source.ptr = stream;
    body.read_callback = ReadAnswer;
    nghttp2_submit_response(session_, stream_id, head_fields->data(), head_fields->size(), &body);
  } else if (stream->deferred) {
    stream->deferred = false;
    nghttp2_session_resume_data(session_, stream_id);
  }
  return true;
}

void ServerSession::Finish(int32_t stream_id, const grpc::Status& status,
                           OnFinished on_finished) {
  Stream* stream = Find(stream_id);
  if (!stream || ended_) {
    if (on_finished) net::post(executor(), std::move(on_finished));
    return;
  }
  stream->on_finished = std::move(on_finished);
  if (stream->answered) return;
  stream->answered = true;
  if (!stream->head_sent) {
    // Trailers-Only: the status in the one HEADERS frame, which ends the stream.
    stream->head_sent = true;
    Metadata head = {{":status", "200"}, {"content-type", "application/grpc"}};
    for (auto& field : StatusFields(status)) head.push_back(std::move(field));
    const auto nv = Fields(head);
    nghttp2_submit_response(session_, stream_id, nv.data(), nv.size(), nullptr);
  } else {
    stream->trailers = StatusFields(status);
    if (stream->deferred) {
      stream->deferred = false;
      nghttp2_session_resume_data(session_, stream_id);
    }
  }
  Flush();
}

// nghttp2 asks for the stream's next DATA bytes, as much as the flow-control windows let
// it take: the pending message's, then, once finished, the end of the body and the
// trailers; until then nothing (deferred: Send or Finish resume it).
ssize_t ServerSession::ReadAnswer(nghttp2_session* session, int32_t stream_id, uint8_t* buffer,
                                  size_t length, uint32_t* flags, nghttp2_data_source* source,
                                  void* self) {
  Stream& stream = *static_cast<Stream*>(source->ptr);
  const size_t size = stream.pending.Take(buffer, length);
  if (stream.pending.done()) {
    stream.pending = OutgoingMessage();  // its bytes go now, not with the stream
    if (stream.on_taken) {
      net::post(Of(self).executor(), [on_taken = std::move(stream.on_taken)] {
        on_taken(absl::OkStatus());
      });
      stream.on_taken = nullptr;
    }
    if (stream.answered) {
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      const auto nv = Fields(stream.trailers);
      nghttp2_submit_trailer(session, stream_id, nv.data(), nv.size());
    } else if (size == 0) {
      stream.deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
  }
  return static_cast<ssize_t>(size);
}

int ServerSession::OnInvalidFrame(nghttp2_session*, const nghttp2_frame* frame, int error,
                                  void* self) {
  ServerSession& session = Of(self);
  session.guard_.OnInvalidFrame(*frame, error, session.streams_.size(),
                                session.limits_.max_concurrent_streams);
  return 0;
}

int ServerSession::OnFrameSent(nghttp2_session*, const nghttp2_frame* frame, void* self) {
  ServerSession& session = Of(self);
  if (frame->hd.type == NGHTTP2_GOAWAY) session.guard_.OnGoawaySent(frame->goaway.error_code);
  if (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) {
    session.lifecycle_.OnAnswerSent();
  }
  // An answer that ends its stream before the caller has sent all of its request (an
  // early refusal, a deadline): RST_STREAM NO_ERROR tells it to stop sending, as gRPC's
  // servers do (PROTOCOL-HTTP2.md), so that its write ends now, not at its deadline.
  if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
      nghttp2_session_get_stream_remote_close(session.session_, frame->hd.stream_id) == 0) {
    nghttp2_submit_rst_stream(session.session_, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                              NGHTTP2_NO_ERROR);
  }
  return 0;
}

int ServerSession::OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t, void* self) {
  ServerSession& session = Of(self);
  auto it = session.streams_.find(stream_id);
  if (it == session.streams_.end()) return 0;
  Stream stream = std::move(it->second);
  session.streams_.erase(it);
  if (stream.started && --session.calls_started_ == 0) session.CallsOpen(false);
  session.Gone(stream);
  return 0;
}

void ServerSession::Watch(int32_t stream_id, StreamWatcher* watcher) {
  if (Stream* stream = Find(stream_id)) {
    stream->watcher = watcher;
  } else {
    watcher->OnStreamReset();
  }
}

void ServerSession::Unwatch(int32_t stream_id) {
  if (Stream* stream = Find(stream_id)) stream->watcher = nullptr;
}

}  // namespace egress::dataplane
