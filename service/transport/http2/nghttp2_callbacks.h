#ifndef EGRESS_SERVICE_TRANSPORT_HTTP2_NGHTTP2_CALLBACKS_H_
#define EGRESS_SERVICE_TRANSPORT_HTTP2_NGHTTP2_CALLBACKS_H_

#include <nghttp2/nghttp2.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "service/transport/http2/session.h"

namespace egress::transport::http2 {

// nghttp2's callbacks: each finds the session in user_data, records what happened and
// returns; user callbacks run later, from Session::Settle. An exception is caught here:
// it must not unwind through nghttp2. Private to the session (session.cc, stream.cc).
struct Session::Callbacks {
  // Sets every callback below on `callbacks` but ReadRequestBody.
  static void Install(nghttp2_session_callbacks* callbacks);
  // A request body's data source: the Stream in source->ptr.
  static ssize_t ReadRequestBody(nghttp2_session*, int32_t stream_id, uint8_t* buffer,
                                 size_t length, uint32_t* flags, nghttp2_data_source* source,
                                 void* user_data);

  // Runs `body` on the session in user_data; an exception ends the session (INTERNAL).
  template <class F>
  static int Protected(void* user_data, F&& body);

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name_data,
                      size_t name_length, const uint8_t* value_data, size_t value_length,
                      uint8_t flags, void* user_data);
  static int OnFrameReceived(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int OnDataChunk(nghttp2_session*, uint8_t flags, int32_t stream_id,
                         const uint8_t* data, size_t length, void* user_data);
  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t error_code,
                           void* user_data);
  static int OnFrameSent(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int OnFrameNotSent(nghttp2_session*, const nghttp2_frame* frame, int library_error,
                            void* user_data);
  static int OnInvalidFrame(nghttp2_session*, const nghttp2_frame* frame, int library_error,
                            void* user_data);
  static int OnError(nghttp2_session*, int library_error, const char* message, size_t length,
                     void* user_data);
};

}  // namespace egress::transport::http2

#endif  // EGRESS_SERVICE_TRANSPORT_HTTP2_NGHTTP2_CALLBACKS_H_
