// The Communicator over Gloo's TCP transport. Collectives run one at a time, in call order (Gloo
// matches them across workers by that order). When one fails, the survivors ask the rendezvous
// which workers are gone or did not come, so the error names them; the group is then broken and
// every later collective fails at once with the first error.

#include <arpa/inet.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <thread>

#include "base/error.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/tcp_store.h"

namespace mf::runtime::comm {
namespace {

using Clock = std::chrono::steady_clock;
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// The address the other workers reach this one at: the local end of a route to the rendezvous
// host (a UDP "connection" sends nothing), so a multi-host job needs no per-host setting.
std::string local_address_towards(const std::string& host) {
  if (host.empty() || host == "127.0.0.1" || host == "localhost") return "127.0.0.1";
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) {
    return "127.0.0.1";
  }
  std::string address = "127.0.0.1";
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t size = sizeof local;
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text) != nullptr) {
      address = text;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return address;
}

template <typename T>
ReduceFn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return &gloo::sum<T>;
    case ReduceOp::kProd:
      return &gloo::product<T>;
    case ReduceOp::kMax:
      return &gloo::max<T>;
    case ReduceOp::kMin:
      return &gloo::min<T>;
  }
  return &gloo::sum<T>;
}

template <typename T>
void run_all_reduce(const std::shared_ptr<gloo::Context>& context, void* data, size_t count,
                    ReduceOp op) {
  gloo::AllreduceOptions options(context);
  T* typed = static_cast<T*>(data);
  options.setOutput(typed, count);
  options.setInput(typed, count);
  options.setReduceFunction(reduce_fn<T>(op));
  gloo::allreduce(options);
}

class GlooCommunicator : public Communicator {
 public:
  explicit GlooCommunicator(const WorldOptions& options) : options_(options) {
    if (!options.sched_host.empty()) {
      if (options.rank == 0)
        server_ = std::make_unique<StoreServer>(options.sched_host, options.sched_port);
      auto tcp = std::make_unique<TcpStore>(options.sched_host, options.sched_port, options.rank,
                                            options.timeout);
      tcp_ = tcp.get();
      store_ = std::move(tcp);
    } else {
      store_ = std::make_unique<gloo::rendezvous::FileStore>(options.store_dir);
    }
    gloo::transport::tcp::attr attr;
    attr.hostname = local_address_towards(options.sched_host);
    try {
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
      context->setTimeout(options.timeout);
      context->connectFullMesh(*store_, device);
      context_ = std::move(context);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      MF_FAIL(Unavailable, "communication.init: worker ", options.rank, " of ", options.size,
              " could not connect to the others: ", missing_workers(0), " (gloo: ", echo(e.what()),
              ")");
    }
  }

  ~GlooCommunicator() override {
    if (tcp_ != nullptr) tcp_->goodbye();
    context_.reset();
    // Worker 0's server outlives its own client: the others may still be saying goodbye.
    store_.reset();
    server_.reset();
  }

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  std::string_view backend() const override { return "gloo"; }

  void all_reduce(void* data, size_t count, ir::DType dtype, ReduceOp op,
                  std::string_view what) override {
    run("AllReduce", what, [&] {
      if (count == 0) return;
      switch (dtype) {
        case ir::DType::kFloat32:
          return run_all_reduce<float>(context_, data, count, op);
        case ir::DType::kFloat64:
          return run_all_reduce<double>(context_, data, count, op);
        case ir::DType::kInt32:
          return run_all_reduce<int32_t>(context_, data, count, op);
        case ir::DType::kInt64:
          return run_all_reduce<int64_t>(context_, data, count, op);
        case ir::DType::kBool:
          break;
      }
      MF_FAIL(InvalidArgument, "AllReduce: ", ir::dtype_name(dtype),
              " is not reduced; cast to Float32, Float64, Int32 or Int64 first");
    });
  }

  void all_gather(const void* in, void* out, size_t bytes, std::string_view what) override {
    run("AllGather", what, [&] {
      if (bytes == 0) return;
      gloo::AllgatherOptions options(context_);
      options.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes);
      options.setOutput(static_cast<char*>(out), bytes * static_cast<size_t>(options_.size));
      gloo::allgather(options);
    });
  }

  void broadcast(void* data, size_t bytes, int root, std::string_view what) override {
    MF_CHECK(root >= 0 && root < options_.size, InvalidArgument, "Broadcast: root_rank ", root,
             " is not a worker of this group of ", options_.size);
    run("Broadcast", what, [&] {
      if (bytes == 0) return;
      gloo::BroadcastOptions options(context_);
      options.setOutput(static_cast<char*>(data), bytes);
      options.setRoot(root);
      gloo::broadcast(options);
    });
  }

  void barrier(std::string_view what) override {
    run("Barrier", what, [&] {
      gloo::BarrierOptions options(context_);
      gloo::barrier(options);
    });
  }

 private:
  template <typename F>
  void run(std::string_view kind, std::string_view what, F&& body) {
    std::lock_guard lock(mutex_);
    MF_CHECK(broken_.empty(), Unavailable, kind, " '", echo(what),
             "': the group is broken since an earlier collective failed (", broken_,
             "); call communication.release() and start the job again");
    const uint64_t sequence = ++sequence_;
    try {
      body();
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kUnavailable) throw;
      broken_ = e.what();
      throw;
    } catch (const std::exception& e) {
      const std::string message =
          std::string(kind) + " '" + echo(what) + "' (collective #" + std::to_string(sequence) +
          " of worker " + std::to_string(options_.rank) + ") failed: " + missing_workers(sequence) +
          " (gloo: " + echo(e.what()) + ")";
      broken_ = message;
      MF_FAIL(Unavailable, message);
    }
  }

  // Which workers did not take part: gone (their connection to the rendezvous dropped) or
  // silent (they did not fail this collective too within a few seconds: hung or still busy).
  std::string missing_workers(uint64_t sequence) {
    auto failed_key = [&](int r) {
      return "mf/failed/" + std::to_string(sequence) + "/" + std::to_string(r);
    };
    if (tcp_ == nullptr) {
      return "a worker is gone or did not answer within " +
             std::to_string(options_.timeout.count() / 1000.0) + " s";
    }
    try {
      tcp_->set(failed_key(options_.rank), {'1'});
    } catch (const Error&) {
      return options_.rank == 0 ? "the other workers are gone"
                                : "worker 0 (it serves the rendezvous) is gone";
    }
    std::vector<std::string> keys;
    for (int r = 0; r < options_.size; ++r) {
      keys.push_back(lost_worker_key(r));
      keys.push_back(failed_key(r));
    }
    const auto deadline = Clock::now() + std::min<std::chrono::milliseconds>(
                                             options_.timeout, std::chrono::seconds(3));
    std::vector<bool> present;
    while (true) {
      present = tcp_->check(keys);
      bool settled = true;
      for (int r = 0; r < options_.size; ++r) {
        settled = settled && (present[2 * r] || present[2 * r + 1]);
      }
      if (settled || Clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::string gone, silent;
    for (int r = 0; r < options_.size; ++r) {
      if (r == options_.rank) continue;
      if (present[2 * r]) {
        gone += (gone.empty() ? "" : ", ") + std::to_string(r);
      } else if (!present[2 * r + 1]) {
        silent += (silent.empty() ? "" : ", ") + std::to_string(r);
      }
    }
    std::string out;
    if (!gone.empty()) out = "worker " + gone + " is gone (its process ended)";
    if (!silent.empty()) {
      out += (out.empty() ? "" : "; ") + std::string("worker ") + silent +
             " did not answer within " + std::to_string(options_.timeout.count() / 1000) +
             " s (hung, or stopped before this collective)";
    }
    return out.empty() ? "every worker reached it; the connection between them failed" : out;
  }

  WorldOptions options_;
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<gloo::rendezvous::Store> store_;
  TcpStore* tcp_ = nullptr;
  std::shared_ptr<gloo::Context> context_;
  std::mutex mutex_;
  uint64_t sequence_ = 0;
  std::string broken_;
};

}  // namespace

std::unique_ptr<Communicator> connect_gloo(const WorldOptions& options) {
  MF_CHECK(options.size >= 1 && options.rank >= 0 && options.rank < options.size, InvalidArgument,
           "communication.init: rank ", options.rank, " is not below the worker count ",
           options.size);
  // Gloo writes to its sockets without MSG_NOSIGNAL: when a worker dies, the next write to it
  // would kill this process with SIGPIPE before the failed collective could name the lost
  // worker. Ignored, the write fails with EPIPE and the collective reports it (Python ignores
  // SIGPIPE already; a handler the program installed itself is kept).
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    ::signal(SIGPIPE, SIG_IGN);
  }
  return std::make_unique<GlooCommunicator>(options);
}

}  // namespace mf::runtime::comm
