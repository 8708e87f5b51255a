#include "tests/support/redis_server.h"

#include "gtest/gtest.h"

namespace egress::testing {

RedisServer::RedisServer(const std::string& dir) : dir_(dir), port_(FreePort()) { Start(); }

void RedisServer::Start() {
  if (process_) return;
  process_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{"redis-server", "--port", std::to_string(port_), "--bind",
                               "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir_},
      dir_ + "/redis.log");
  if (!WaitForPort(port_, 10)) ADD_FAILURE() << "redis-server did not listen on " << port_;
}

}  // namespace egress::testing
