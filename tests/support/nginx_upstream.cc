#include "tests/support/nginx_upstream.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/child_process.h"

namespace egress::testing {
namespace {

void Run(const std::string& command) {
  if (std::system(command.c_str()) != 0) {
    throw std::runtime_error(absl::StrCat("command failed: ", command));
  }
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  if (!out) throw std::runtime_error(absl::StrCat("cannot write ", path));
}

// Locations shared by every server block.
std::string Locations(const std::string& dir) {
  return absl::StrCat(R"(
    root )", dir, R"(/www;
    location /cl/ { }
    location /close/ { keepalive_timeout 0; alias )", dir, R"(/www/cl/; }
    location = /chunked/1k { echo_duplicate 1024 "c"; }
    location = /chunked/300k { echo_duplicate 307200 "c"; }
    location = /chunked/mixed {
      echo_duplicate 3 "x"; echo_flush;
      echo_duplicate 1021 "y"; echo_flush;
      echo_duplicate 70001 "z";
    }
    location = /stall { echo_duplicate 1024 "a"; echo_flush; echo_sleep 0.08; echo_duplicate 1024 "b"; }
    location = /slow-head { echo_sleep 3; echo "late"; }
    location = /slow-300ms { echo_sleep 0.3; echo "late"; }
    location = /echo { echo "ok"; }
    location = /trace { echo "$http_traceparent|$http_tracestate"; }
    location = /upload { client_max_body_size 64m; echo_read_request_body; echo $content_length; }
    location = /redirect-internal { return 302 http://127.0.0.1:$server_port/cl/1k; }
    location = /redirect-relative { return 302 /cl/1k; }
    location = /redirect-loop { return 302 /redirect-loop; }
    location = /latin1-header {
      add_header Content-Disposition "attachment; filename=\"caf)" "\xE9" R"(.txt\"";
      echo "ok";
    }
)");
}

}  // namespace

std::vector<std::pair<std::string, size_t>> NginxUpstream::FileSizes() {
  return {{"1k", 1024},          {"4k", 4096},          {"100k", 102400},
          {"262144", 262144},    {"262145", 262145}, {"6m", 6 << 20}};
}

std::string NginxUpstream::FileContent(const std::string& name) {
  for (const auto& [file, size] : FileSizes()) {
    if (file != name) continue;
    std::string content(size, '\0');
    // Not periodic at any small size, so that an off-by-N slice is caught.
    for (size_t i = 0; i < size; ++i) content[i] = static_cast<char>('!' + (i * 7 + i / 251) % 90);
    return content;
  }
  throw std::runtime_error(absl::StrCat("no test file ", name));
}

std::unique_ptr<NginxUpstream> NginxUpstream::Start(const std::string& dir) {
  std::unique_ptr<NginxUpstream> nginx(new NginxUpstream());
  nginx->dir_ = dir;
  Run(absl::StrCat("mkdir -p ", dir, "/www/cl ", dir, "/tmp ", dir, "/logs"));

  // Test PKI: a CA and a server certificate for localhost and 127.0.0.1.
  const std::string pki = absl::StrCat(dir, "/pki");
  Run(absl::StrCat("mkdir -p ", pki, " && cd ", pki,
                   " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1"
                   " -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=egress-test-ca"
                   " 2>/dev/null"
                   " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
                   " -keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null"
                   " && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext"
                   " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key"
                   " -CAcreateserial -out server.pem -days 2 -extfile san.ext 2>/dev/null"
                   " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
                   " -keyout client.key -out client.csr -subj /CN=egress-client 2>/dev/null"
                   " && printf 'extendedKeyUsage=clientAuth\\n' > client.ext"
                   " && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key"
                   " -CAcreateserial -out client.pem -days 2 -extfile client.ext 2>/dev/null"));
  nginx->ca_file_ = absl::StrCat(pki, "/ca.pem");

  for (const auto& [name, size] : FileSizes()) {
    WriteFile(absl::StrCat(dir, "/www/cl/", name), FileContent(name));
  }

  nginx->http_port_ = FreePort();
  nginx->https_port_ = FreePort();
  nginx->idle_close_port_ = FreePort();
  nginx->mtls_port_ = FreePort();
  nginx->tls12_port_ = FreePort();
  nginx->tls13_port_ = FreePort();
  const std::string certificate = absl::StrCat("ssl_certificate ", pki,
                                               "/server.pem; ssl_certificate_key ", pki,
                                               "/server.key;");
  const std::string tls = certificate + " ssl_protocols TLSv1.2 TLSv1.3;";
  nginx->keepalive_hint_port_ = FreePort();
  nginx->http2_port_ = FreePort();
  nginx->h2c_port_ = FreePort();
  nginx->http2_goaway_port_ = FreePort();
  const std::string config = absl::StrCat(R"(
load_module /usr/lib/nginx/modules/ngx_http_echo_module.so;
daemon off;
master_process off;
worker_processes 1;
pid )", dir, R"(/nginx.pid;
error_log )", dir, R"(/logs/error.log warn;
events { worker_connections 4096; }
http {
  log_format conn '$connection $connection_requests $request_method $request_uri';
  access_log )", dir, R"(/logs/access.log conn;
  log_format tls '$server_port $ssl_protocol $ssl_session_reused $connection_requests $request_uri';
  log_format h2 '$connection $connection_requests $server_protocol $request_method $request_uri';
  client_body_temp_path )", dir, R"(/tmp/body;
  proxy_temp_path )", dir, R"(/tmp/proxy;
  fastcgi_temp_path )", dir, R"(/tmp/fastcgi;
  uwsgi_temp_path )", dir, R"(/tmp/uwsgi;
  scgi_temp_path )", dir, R"(/tmp/scgi;
  default_type application/octet-stream;
  keepalive_requests 1000000;
  keepalive_timeout 300s;
  server {
    listen 127.0.0.1:)", nginx->http_port_, R"(;
    listen 127.0.0.2:)", nginx->http_port_, R"(;
    listen 127.0.0.1:)", nginx->https_port_, R"( ssl;
    )", tls, Locations(dir), R"(
  }
  server {
    listen 127.0.0.1:)", nginx->idle_close_port_, R"( ssl;
    keepalive_timeout 1s;
    )", tls, Locations(dir), R"(
  }
  server {
    listen 127.0.0.1:)", nginx->mtls_port_, R"( ssl;
    ssl_verify_client on;
    ssl_client_certificate )", pki, R"(/ca.pem;
    )", tls, Locations(dir), R"(
  }
  server {
    listen 127.0.0.1:)", nginx->tls12_port_, R"( ssl;
    access_log )", dir, R"(/logs/tls.log tls;
    )", certificate, R"( ssl_protocols TLSv1.2;
    )", Locations(dir), R"(
  }
  server {
    listen 127.0.0.1:)", nginx->tls13_port_, R"( ssl;
    access_log )", dir, R"(/logs/tls.log tls;
    )", certificate, R"( ssl_protocols TLSv1.3;
    )", Locations(dir), R"(
  }
  server {
    listen 127.0.0.1:)", nginx->http2_port_, R"( ssl http2;
    access_log )", dir, R"(/logs/h2.log h2;
    )", tls, Locations(dir), R"(
  }
  server {
    listen 127.0.0.1:)", nginx->h2c_port_, R"( http2;
    access_log )", dir, R"(/logs/h2.log h2;
    )", Locations(dir), R"(
  }
  server {
    listen 127.0.0.1:)", nginx->http2_goaway_port_, R"( ssl http2;
    keepalive_requests 10;
    access_log )", dir, R"(/logs/h2.log h2;
    )", tls, Locations(dir), R"(
  }
  server {
    listen 127.0.0.1:)", nginx->keepalive_hint_port_, R"(;
    keepalive_timeout 2s 2s;
    keepalive_requests 3;
    )", Locations(dir), R"(
  }
}
)");
  const std::string config_path = absl::StrCat(dir, "/nginx.conf");
  WriteFile(config_path, config);

  nginx->process_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{"nginx", "-c", config_path, "-p", dir, "-e",
                               dir + "/logs/error.log"},
      dir + "/logs/stderr.log");
  for (int port : {nginx->http_port_, nginx->https_port_, nginx->idle_close_port_,
                   nginx->mtls_port_, nginx->tls12_port_, nginx->tls13_port_,
                   nginx->keepalive_hint_port_, nginx->http2_port_, nginx->h2c_port_,
                   nginx->http2_goaway_port_}) {
    if (!WaitForPort(port, 5) || !nginx->process_->Running()) {
      std::ifstream log(dir + "/logs/error.log");
      std::stringstream text;
      text << log.rdbuf();
      throw std::runtime_error("nginx did not start: " + text.str());
    }
  }
  return nginx;
}

NginxUpstream::~NginxUpstream() = default;

std::string NginxUpstream::HttpUrl(const std::string& path) const {
  return absl::StrCat("http://127.0.0.1:", http_port_, path);
}

std::string NginxUpstream::HttpsUrl(const std::string& path) const {
  return absl::StrCat("https://localhost:", https_port_, path);
}

std::string NginxUpstream::Http2Url(const std::string& path) const {
  return absl::StrCat("https://localhost:", http2_port_, path);
}

std::string NginxUpstream::H2cUrl(const std::string& path) const {
  return absl::StrCat("http://localhost:", h2c_port_, path);
}

std::string NginxUpstream::Http2GoawayUrl(const std::string& path) const {
  return absl::StrCat("https://localhost:", http2_goaway_port_, path);
}

std::vector<std::vector<std::string>> NginxUpstream::WaitForLogLines(const std::string& log,
                                                                     size_t fields,
                                                                     const std::string& uri,
                                                                     size_t expected) const {
  std::vector<std::vector<std::string>> lines;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (true) {
    lines.clear();
    std::ifstream file(dir_ + "/logs/" + log);
    std::string line;
    while (std::getline(file, line)) {
      std::vector<std::string> split = absl::StrSplit(line, ' ');
      if (split.size() == fields && split.back() == uri) lines.push_back(std::move(split));
    }
    if (lines.size() >= expected || std::chrono::steady_clock::now() > give_up) return lines;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<NginxUpstream::LogEntry> NginxUpstream::WaitForRequests(const std::string& uri,
                                                                    size_t expected) const {
  std::vector<LogEntry> entries;
  for (const auto& fields : WaitForLogLines("access.log", 4, uri, expected)) {
    LogEntry entry;
    entry.connection = std::stoull(fields[0]);
    entry.connection_requests = std::stoi(fields[1]);
    entry.method = fields[2];
    entry.uri = fields[3];
    entries.push_back(entry);
  }
  return entries;
}

std::vector<NginxUpstream::TlsLogEntry> NginxUpstream::TlsRequests(const std::string& uri,
                                                                   size_t expected) const {
  std::vector<TlsLogEntry> entries;
  for (const auto& fields : WaitForLogLines("tls.log", 5, uri, expected)) {
    TlsLogEntry entry;
    entry.port = std::stoi(fields[0]);
    entry.protocol = fields[1];
    entry.session_reused = fields[2] == "r";
    entry.connection_requests = std::stoi(fields[3]);
    entry.uri = fields[4];
    entries.push_back(entry);
  }
  return entries;
}

std::vector<NginxUpstream::Http2LogEntry> NginxUpstream::Http2Requests(const std::string& uri,
                                                                       size_t expected) const {
  std::vector<Http2LogEntry> entries;
  for (const auto& fields : WaitForLogLines("h2.log", 5, uri, expected)) {
    Http2LogEntry entry;
    entry.connection = std::stoull(fields[0]);
    entry.connection_requests = std::stoi(fields[1]);
    entry.protocol = fields[2];
    entry.method = fields[3];
    entry.uri = fields[4];
    entries.push_back(entry);
  }
  return entries;
}

int NginxUpstream::NewConnections(const std::string& uri, size_t expected) const {
  int count = 0;
  for (const LogEntry& entry : WaitForRequests(uri, expected)) {
    if (entry.connection_requests == 1) ++count;
  }
  return count;
}

}  // namespace egress::testing
