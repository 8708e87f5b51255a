// The access log's redaction against URL shapes: a URL made of the input's bytes with a
// secret in its userinfo, query or fragment (fuzz/secret_urls.h, which also states the
// rule), and headers whose values hold the secret. It checks that
//   - the url field (AccessLog::LoggedUrl) shows no secret,
//   - the error MakeRequest (the request mapping every fetch and redirect goes through)
//     makes of the URL and headers quotes a secret only through transport::UrlError,
//     and the log's message (AccessLog::LoggedMessage) shows no secret.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>

#include "absl/strings/escaping.h"
#include "fuzz/secret_urls.h"
#include "service/access_log/access_log.h"
#include "service/base/error_reason.h"
#include "service/transport/http/request.h"

namespace {

using egress::fuzz::ShowsSecret;

void Check(bool condition, const char* what, const std::string& url, absl::string_view shown) {
  if (condition) return;
  std::fprintf(stderr, "url_redaction_fuzzer: %s\n  url: %s\n  shown: %s\n", what,
               absl::CHexEscape(url).c_str(), absl::CHexEscape(shown).c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const bool keep_query = in.ConsumeBool();
  const std::string url = egress::fuzz::SecretUrl(in, {}, keep_query);

  const std::string logged = egress::AccessLog::LoggedUrl(url, keep_query);
  Check(!ShowsSecret(logged), "the url field shows a secret", url, logged);

  static const char* const kNames[] = {"Authorization", "Cookie", "Upgrade", "Connection",
                                       "X-Api-Key"};
  egress::transport::HeaderList headers;
  for (int h = in.ConsumeIntegralInRange(0, 3); h > 0; --h) {
    const egress::fuzz::UrlShape any;
    std::string name = in.ConsumeBool()
                           ? kNames[in.ConsumeIntegralInRange<size_t>(0, std::size(kNames) - 1)]
                           : egress::fuzz::Piece(in, 16, any);
    headers.emplace_back(std::move(name),
                         egress::fuzz::WithSecret(in, egress::fuzz::Piece(in, 32, any)));
  }
  const std::string method = in.ConsumeBool() ? "GET" : egress::fuzz::Piece(in, 8, {});
  const auto request = egress::transport::MakeRequest(method, url, headers, "");
  if (request.ok()) return 0;
  const absl::Status& error = request.status();
  const std::string message(error.message());
  // Only a message that carries its URL for the log's redaction may quote a secret.
  if (!egress::transport::QuotedUrlOf(error)) {
    Check(!ShowsSecret(message), "a message quotes a secret without transport::UrlError", url,
          message);
  }
  const std::string logged_message = egress::AccessLog::LoggedMessage(error, keep_query);
  Check(!ShowsSecret(logged_message), "the log's error message shows a secret", url,
        logged_message);
  return 0;
}
