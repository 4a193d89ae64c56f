// Started collectives and the communication thread that runs every collective of the world in
// call order (communicator.h).

#include <deque>
#include <functional>
#include <future>
#include <thread>
#include <utility>

#include "base/error.h"
#include "runtime/comm/communicator.h"

namespace mf::runtime::comm {
namespace {

std::mutex stats_mutex;
OverlapStats stats;

double seconds_between(PendingCollective::Clock::time_point from,
                       PendingCollective::Clock::time_point to) {
  return to > from ? std::chrono::duration<double>(to - from).count() : 0.0;
}

class ThreadedCommunicator : public Communicator {
 public:
  explicit ThreadedCommunicator(std::unique_ptr<Communicator> inner)
      : inner_(std::move(inner)), thread_([this] { serve(); }) {}

  ~ThreadedCommunicator() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    queued_.notify_all();
    thread_.join();  // runs what is queued first: a started collective always ends
  }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string_view backend() const override { return inner_->backend(); }

  void all_reduce(void* data, size_t count, ir::DType dtype, ReduceOp op,
                  std::string_view what) override {
    run_in_turn([&] { inner_->all_reduce(data, count, dtype, op, what); });
  }
  void all_gather(const void* in, void* out, size_t bytes, std::string_view what) override {
    run_in_turn([&] { inner_->all_gather(in, out, bytes, what); });
  }
  void broadcast(void* data, size_t bytes, int root, std::string_view what) override {
    run_in_turn([&] { inner_->broadcast(data, bytes, root, what); });
  }
  void barrier(std::string_view what) override {
    run_in_turn([&] { inner_->barrier(what); });
  }

  std::shared_ptr<PendingCollective> start_all_reduce(void* data, size_t count, ir::DType dtype,
                                                      ReduceOp op, std::string what) override {
    auto pending = std::make_shared<PendingCollective>();
    enqueue([this, pending, data, count, dtype, op, what = std::move(what)] {
      const auto started = PendingCollective::Clock::now();
      std::exception_ptr error;
      try {
        inner_->all_reduce(data, count, dtype, op, what);
      } catch (...) {
        error = std::current_exception();
      }
      pending->finish(started, PendingCollective::Clock::now(), error);
    });
    return pending;
  }

 private:
  void enqueue(std::function<void()> job) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    queued_.notify_one();
  }

  // A blocking collective runs on the caller when nothing is queued or running (no thread hop);
  // otherwise it queues behind the started ones and waits for its own turn.
  template <typename F>
  void run_in_turn(F&& body) {
    {
      std::unique_lock lock(mutex_);
      if (jobs_.empty() && !busy_) {
        busy_ = true;
        lock.unlock();
        struct Idle {
          ThreadedCommunicator& self;
          ~Idle() { self.set_idle(); }
        } idle{*this};
        body();
        return;
      }
    }
    std::promise<void> ended;
    enqueue([&body, &ended] {
      try {
        body();
        ended.set_value();
      } catch (...) {
        ended.set_exception(std::current_exception());
      }
    });
    ended.get_future().get();
  }

  void set_idle() {
    {
      std::lock_guard lock(mutex_);
      busy_ = false;
    }
    queued_.notify_all();
  }

  void serve() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex_);
        queued_.wait(lock, [this] { return !busy_ && (stopping_ || !jobs_.empty()); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
        busy_ = true;
      }
      job();
      set_idle();
    }
  }

  std::unique_ptr<Communicator> inner_;
  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  bool busy_ = false;   // a collective is running, on this thread or on a caller
  std::thread thread_;  // last: it starts serving once everything above exists
};

}  // namespace

void PendingCollective::finish(Clock::time_point started, Clock::time_point ended,
                               std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    started_ = started;
    ended_ = ended;
    error_ = std::move(error);
    done_ = true;
  }
  finished_.notify_all();
}

bool PendingCollective::done() const {
  std::lock_guard lock(mutex_);
  return done_;
}

void PendingCollective::wait() {
  const Clock::time_point asked = Clock::now();
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [this] { return done_; });
  if (!waited_) {
    waited_ = true;
    // What ran before anyone asked for the result was hidden behind the caller's work.
    std::lock_guard stats_lock(stats_mutex);
    ++stats.collectives;
    stats.seconds += seconds_between(started_, ended_);
    stats.hidden_seconds += seconds_between(started_, std::min(ended_, asked));
  }
  if (error_) std::rethrow_exception(error_);
}

OverlapStats take_overlap_stats() {
  std::lock_guard lock(stats_mutex);
  return std::exchange(stats, OverlapStats{});
}

std::shared_ptr<PendingCollective> Communicator::start_all_reduce(void* data, size_t count,
                                                                  ir::DType dtype, ReduceOp op,
                                                                  std::string what) {
  auto pending = std::make_shared<PendingCollective>();
  const auto started = PendingCollective::Clock::now();
  std::exception_ptr error;
  try {
    all_reduce(data, count, dtype, op, what);
  } catch (...) {
    error = std::current_exception();
  }
  pending->finish(started, PendingCollective::Clock::now(), error);
  return pending;
}

std::unique_ptr<Communicator> on_communication_thread(std::unique_ptr<Communicator> inner) {
  MF_CHECK(inner != nullptr, Internal, "on_communication_thread: no communicator");
  return std::make_unique<ThreadedCommunicator>(std::move(inner));
}

}  // namespace mf::runtime::comm
