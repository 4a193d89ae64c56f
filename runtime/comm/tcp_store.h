#pragma once
// The rendezvous of a job over TCP: worker 0 serves a key-value store at MS_SCHED_HOST:
// MS_SCHED_PORT, and every worker (worker 0 too) is a client of it. Gloo exchanges its addresses
// through it; afterwards it tells the survivors of a failed collective which workers are gone.
//
// The protocol is a byte stream of requests [op u8][key length u32][key][value length u32][value]
// (little-endian lengths); every request gets one reply at once, so the server keeps no waiting
// state: a client that waits for a key asks again until it is there or its time is up.

#include <gloo/rendezvous/store.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mf::runtime::comm {

// The key under which the server records that worker `rank` left without saying goodbye.
std::string lost_worker_key(int rank);

class StoreServer {
 public:
  // Listens on host:port (host "" or "0.0.0.0": every interface). Unavailable when the port is
  // taken.
  StoreServer(const std::string& host, int port);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

 private:
  void serve();
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};
  std::thread thread_;
};

class TcpStore : public gloo::rendezvous::Store {
 public:
  // Connects, trying again until `timeout` (worker 0 may start its server later than others).
  TcpStore(const std::string& host, int port, int rank, std::chrono::milliseconds timeout);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  // Which of `keys` are set now; false for all when the server is gone.
  std::vector<bool> check(const std::vector<std::string>& keys);
  // Tells the server this worker leaves on purpose (not lost).
  void goodbye();

 private:
  std::vector<char> request(char op, const std::string& key, const std::vector<char>& value);
  std::mutex mutex_;
  int fd_ = -1;
  std::chrono::milliseconds timeout_;
  std::string where_;
};

}  // namespace mf::runtime::comm
