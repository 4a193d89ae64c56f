#pragma once
// Collectives between the processes of one job. The engine sees only this interface (the
// collective ops' kernels, the data-parallel gradient reducer); Gloo over TCP implements it today
// (gloo_communicator.cc), so another backend is one more implementation.
//
// The process-wide group ("the world") is set up once by init_world() and torn down by
// release_world(). Every worker must call the same collectives in the same order with the same
// sizes: a collective is matched across workers by its position in that order.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "ir/dtype.h"

namespace mf::runtime::comm {

enum class ReduceOp { kSum, kMax, kMin, kProd };
std::string_view to_string(ReduceOp op);  // "sum", ...

// A collective started by Communicator::start_all_reduce, running while its caller goes on.
class PendingCollective {
 public:
  using Clock = std::chrono::steady_clock;
  // Blocks until the collective has ended; rethrows its error. Later calls return at once (and
  // rethrow the same error).
  void wait();
  bool done() const;
  // For the one that runs it: the collective ran from `started` to `ended`, failing with `error`
  // (null: it succeeded).
  void finish(Clock::time_point started, Clock::time_point ended, std::exception_ptr error);

 private:
  mutable std::mutex mutex_;
  std::condition_variable finished_;
  bool done_ = false;
  bool waited_ = false;
  std::exception_ptr error_;
  Clock::time_point started_, ended_;
};

// What the started collectives of this process cost since the last call, and how much of that
// ran while their callers were still working (before anyone waited for them): the overlap.
struct OverlapStats {
  int collectives = 0;
  double seconds = 0;
  double hidden_seconds = 0;
};
OverlapStats take_overlap_stats();

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string_view backend() const = 0;  // "gloo"
  // In place over `count` elements of `dtype`. `what` names the collective in errors.
  virtual void all_reduce(void* data, size_t count, ir::DType dtype, ReduceOp op,
                          std::string_view what) = 0;
  // out holds size() * bytes: rank r's input lands at out + r * bytes.
  virtual void all_gather(const void* in, void* out, size_t bytes, std::string_view what) = 0;
  virtual void broadcast(void* data, size_t bytes, int root, std::string_view what) = 0;
  virtual void barrier(std::string_view what) = 0;
  // all_reduce without waiting: it runs after every collective called before it, and `data` must
  // stay valid and untouched until the returned collective is done. This default runs it at once.
  virtual std::shared_ptr<PendingCollective> start_all_reduce(void* data, size_t count,
                                                              ir::DType dtype, ReduceOp op,
                                                              std::string what);
};

// Runs every collective of `inner` on one communication thread, in call order: a started
// all-reduce travels while the caller computes, and a blocking collective called meanwhile waits
// its turn instead of overtaking it (which would pair it with another collective on the other
// workers).
std::unique_ptr<Communicator> on_communication_thread(std::unique_ptr<Communicator> inner);

// How a worker finds the others: through MindSpore's dynamic-cluster variables (MS_WORKER_NUM,
// MS_SCHED_HOST, MS_SCHED_PORT, MS_NODE_ID, MS_ROLE) where worker 0 serves the rendezvous, or a
// directory every worker can write (a file store; MF_COMM_STORE_DIR).
struct WorldOptions {
  int rank = 0;
  int size = 1;
  std::string sched_host;  // with sched_port: the TCP rendezvous that worker 0 serves
  int sched_port = 0;
  std::string store_dir;  // else a file store in this directory
  // A collective or the rendezvous that waits longer fails, naming the workers that did not come
  // (MF_COMM_TIMEOUT, in seconds).
  std::chrono::milliseconds timeout = std::chrono::seconds(60);
};

// Reads the variables; InvalidArgument naming the variable when one is missing or malformed.
WorldOptions world_options_from_env();

// Connects this process to the others through Gloo. Unavailable when they do not all come within
// the timeout.
std::unique_ptr<Communicator> connect_gloo(const WorldOptions& options);

// A group of this process alone (a job started without MS_WORKER_NUM): collectives are identities.
std::unique_ptr<Communicator> solo_communicator();

// The world: set by init_world (InvalidArgument when already set), which runs a group of several
// on a communication thread; null until then and after release_world (which waits at a barrier, so
// no worker leaves while another still needs it).
void init_world(std::unique_ptr<Communicator> world);
Communicator* world();
void release_world();

}  // namespace mf::runtime::comm
