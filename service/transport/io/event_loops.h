#ifndef EGRESS_SERVICE_TRANSPORT_IO_EVENT_LOOPS_H_
#define EGRESS_SERVICE_TRANSPORT_IO_EVENT_LOOPS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"

namespace egress::transport {

// The transport's I/O threads: one io_context per thread, as nginx has one event loop per
// worker. A connection lives on one loop, so its reads, writes and timers complete on the
// thread that started them; with one io_context shared by all threads, a completion
// could wake another thread and hand the connection over to it.
class EventLoops {
 public:
  // `threads` loops (at least one), each run by its own thread until Stop. A handler that
  // throws is reported to `on_exception` (with its what(), or null) and the loop goes on.
  EventLoops(unsigned threads, std::function<void(const char* what)> on_exception);
  ~EventLoops();

  // The loop the transport's own timers and jobs run on.
  boost::asio::io_context& first() { return loops_.front()->context; }
  // The loop for the next connection: each in turn.
  boost::asio::io_context& Next();
  // The loop for a connection dialed now: the calling thread's own when it runs one (a
  // fetch made on a loop, as the loop data plane makes them, keeps its I/O on its
  // thread), else Next().
  boost::asio::io_context& ForNewConnection();
  // Every loop, by index (0 is first()): for a server that accepts on each loop, so that
  // the calls it serves run on the threads their fetches' I/O runs on.
  size_t size() const { return loops_.size(); }
  boost::asio::io_context& at(size_t index) { return loops_[index]->context; }
  // Stops every loop (handlers not yet run are dropped) and joins the threads; once.
  void Stop();

 private:
  // An io_context whose services (and the handlers they hold) can be shut down before
  // any loop is destroyed: a handler left on one loop may own a connection on another.
  struct Context : boost::asio::io_context {
    Context() : io_context(1) {}  // run by one thread
    using boost::asio::execution_context::shutdown;
  };
  struct Loop {
    Context context;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{
        context.get_executor()};
    std::thread thread;
  };
  void Run(boost::asio::io_context& context);

  const std::function<void(const char*)> on_exception_;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::atomic<size_t> next_{0};
};

}  // namespace egress::transport

#endif  // EGRESS_SERVICE_TRANSPORT_IO_EVENT_LOOPS_H_
