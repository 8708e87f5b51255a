// The transport's event loops: one thread each, connections spread over them in turn, a
// throwing handler reported without ending its loop, and a teardown that never reaches
// a loop already destroyed.
#include "service/transport/io/event_loops.h"

#include <atomic>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "boost/asio/post.hpp"
#include "boost/asio/steady_timer.hpp"
#include "gtest/gtest.h"

namespace egress::transport {
namespace {

namespace net = boost::asio;

// The thread that runs `loop`'s handlers.
std::thread::id ThreadOf(net::io_context& loop) {
  std::promise<std::thread::id> id;
  net::post(loop, [&] { id.set_value(std::this_thread::get_id()); });
  return id.get_future().get();
}

TEST(EventLoopsTest, EachLoopHasOneThreadAndNewConnectionsTakeThemInTurn) {
  EventLoops loops(2, [](const char*) {});
  net::io_context& a = loops.Next();
  net::io_context& b = loops.Next();
  EXPECT_NE(&a, &b);
  EXPECT_EQ(&loops.Next(), &a);
  EXPECT_EQ(&a, &loops.first());
  const std::thread::id thread_a = ThreadOf(a);
  EXPECT_NE(thread_a, ThreadOf(b));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(ThreadOf(a), thread_a);
}

// A connection dialed by a fetch made on a loop (the loop data plane's) lives on that
// loop; one dialed from any other thread takes the loops in turn.
TEST(EventLoopsTest, AConnectionDialedOnALoopStaysOnItAndElsewhereTakesTheLoopsInTurn) {
  EventLoops loops(2, [](const char*) {});
  for (size_t i = 0; i < loops.size(); ++i) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      std::promise<net::io_context*> chosen;
      net::post(loops.at(i), [&] { chosen.set_value(&loops.ForNewConnection()); });
      EXPECT_EQ(chosen.get_future().get(), &loops.at(i));
    }
  }
  net::io_context& a = loops.ForNewConnection();
  net::io_context& b = loops.ForNewConnection();
  EXPECT_NE(&a, &b);
}

TEST(EventLoopsTest, AHandlerThatThrowsIsReportedAndItsLoopGoesOn) {
  std::atomic<int> reported{0};
  std::string what;
  EventLoops loops(1, [&](const char* w) {
    what = w ? w : "";
    ++reported;
  });
  net::post(loops.first(), [] { throw std::runtime_error("boom"); });
  ThreadOf(loops.first());  // runs after the throwing handler, on the same loop
  EXPECT_EQ(reported, 1);
  EXPECT_EQ(what, "boom");
}

// A handler left on one loop may own an I/O object of another (an exchange queued on
// one connection's loop holds a connection on another). Destroying it must find the
// other loop still there: under ASan, a loop freed first is a use after free.
TEST(EventLoopsTest, AHandlerLeftOnOneLoopMayOwnAnIoObjectOfAnother) {
  auto loops = std::make_unique<EventLoops>(2, [](const char*) {});
  net::io_context& first = loops->Next();
  net::io_context& second = loops->Next();
  loops->Stop();
  auto timer = std::make_shared<net::steady_timer>(first);
  net::post(second, [timer] {});  // never runs: the loops are stopped
  timer.reset();                  // the handler holds the last reference
  loops.reset();
  SUCCEED();
}

}  // namespace
}  // namespace egress::transport
