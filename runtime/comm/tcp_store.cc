#include "runtime/comm/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "base/error.h"

namespace mf::runtime::comm {
namespace {

using Clock = std::chrono::steady_clock;

// Requests larger than this are a broken or hostile client, never a worker of ours.
constexpr uint32_t kMaxKey = 4096;
constexpr uint32_t kMaxValue = 64u << 20;

void put_u32(std::vector<char>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

void send_all(int fd, const std::vector<char>& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    MF_CHECK(n > 0, Unavailable, "the rendezvous server closed the connection (",
             std::strerror(errno), ")");
    sent += static_cast<size_t>(n);
  }
}

// Reads exactly `size` bytes before `deadline`.
void recv_all(int fd, char* out, size_t size, Clock::time_point deadline) {
  size_t got = 0;
  while (got < size) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    MF_CHECK(left > 0, Unavailable, "the rendezvous server did not answer in time");
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::recv(fd, out + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    MF_CHECK(n > 0, Unavailable, "the rendezvous server closed the connection");
    got += static_cast<size_t>(n);
  }
}

std::vector<char> encode(char op, const std::string& key, const std::vector<char>& value) {
  std::vector<char> out;
  out.reserve(9 + key.size() + value.size());
  out.push_back(op);
  put_u32(out, static_cast<uint32_t>(key.size()));
  out.insert(out.end(), key.begin(), key.end());
  put_u32(out, static_cast<uint32_t>(value.size()));
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

std::vector<std::string> split_keys(const std::string& joined) {
  std::vector<std::string> keys;
  size_t start = 0;
  while (start <= joined.size()) {
    const size_t end = joined.find('\0', start);
    keys.push_back(
        joined.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return keys;
}

struct Connection {
  int fd;
  std::vector<char> in;
  int rank = -1;
  bool said_goodbye = false;
};

// Handles every complete request in `c.in`; false when the client sent something malformed.
bool handle_requests(Connection& c, std::map<std::string, std::vector<char>>& store) {
  size_t pos = 0;
  while (true) {
    if (c.in.size() - pos < 5) break;
    const char op = c.in[pos];
    const uint32_t key_size = get_u32(&c.in[pos + 1]);
    if (key_size > kMaxKey) return false;
    if (c.in.size() - pos < 9 + size_t{key_size}) break;
    const uint32_t value_size = get_u32(&c.in[pos + 5 + key_size]);
    if (value_size > kMaxValue) return false;
    const size_t total = 9 + size_t{key_size} + value_size;
    if (c.in.size() - pos < total) break;
    const std::string key(&c.in[pos + 5], key_size);
    const char* value = &c.in[pos + 9 + key_size];
    std::vector<char> reply_body;
    switch (op) {
      case 'H':
        c.rank = std::atoi(key.c_str());
        break;
      case 'B':
        c.said_goodbye = true;
        break;
      case 'S':
        store[key].assign(value, value + value_size);
        break;
      case 'G': {
        const auto it = store.find(key);
        reply_body.push_back(it == store.end() ? 0 : 1);
        if (it != store.end())
          reply_body.insert(reply_body.end(), it->second.begin(), it->second.end());
        break;
      }
      case 'Q':
        for (const std::string& k : split_keys(key)) reply_body.push_back(store.count(k) ? 1 : 0);
        break;
      default:
        return false;
    }
    std::vector<char> reply;
    put_u32(reply, static_cast<uint32_t>(reply_body.size()));
    reply.insert(reply.end(), reply_body.begin(), reply_body.end());
    try {
      send_all(c.fd, reply);
    } catch (const Error&) {
      return false;
    }
    pos += total;
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(pos));
  return true;
}

}  // namespace

std::string lost_worker_key(int rank) {
  return "mf/lost/" + std::to_string(rank);
}

StoreServer::StoreServer(const std::string& host, int port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  MF_CHECK(listen_fd_ >= 0, Unavailable, "rendezvous: cannot open a socket (", std::strerror(errno),
           ")");
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (!host.empty() && host != "0.0.0.0" &&
      ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    addrinfo hints{}, *found = nullptr;
    hints.ai_family = AF_INET;
    const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
    if (rc == 0 && found != nullptr) {
      addr.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
      ::freeaddrinfo(found);
    } else {
      ::close(listen_fd_);
      MF_FAIL(InvalidArgument, "rendezvous: MS_SCHED_HOST '", echo(host),
              "' is not an address or a known host name");
    }
  }
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 512) != 0) {
    const std::string why = std::strerror(errno);
    ::close(listen_fd_);
    MF_FAIL(Unavailable, "rendezvous: worker 0 cannot listen on ", echo(host), ":", port, " (", why,
            "); choose a free port with MS_SCHED_PORT (mf launch --master_port)");
  }
  MF_CHECK(::pipe2(wake_fds_, O_CLOEXEC) == 0, Unavailable, "rendezvous: cannot make a pipe");
  thread_ = std::thread([this] { serve(); });
}

StoreServer::~StoreServer() {
  const char stop = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fds_[1], &stop, 1);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_fds_[0]);
  ::close(wake_fds_[1]);
}

void StoreServer::serve() {
  std::map<std::string, std::vector<char>> store;
  std::vector<Connection> connections;
  while (true) {
    std::vector<pollfd> fds{{wake_fds_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Connection& c : connections) fds.push_back({c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        connections.push_back({.fd = fd, .in = {}});
      }
    }
    std::vector<Connection> kept;
    for (size_t i = 0; i < connections.size(); ++i) {
      Connection& c = connections[i];
      bool open = true;
      if (fds[i + 2].revents != 0) {
        char buffer[65536];
        const ssize_t n = ::recv(c.fd, buffer, sizeof buffer, 0);
        if (n > 0) {
          c.in.insert(c.in.end(), buffer, buffer + n);
          open = c.in.size() <= kMaxValue + kMaxKey + 16 && handle_requests(c, store);
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          open = false;
        }
      }
      if (open) {
        kept.push_back(std::move(c));
        continue;
      }
      if (c.rank >= 0 && !c.said_goodbye) store[lost_worker_key(c.rank)] = {'1'};
      ::close(c.fd);
    }
    connections = std::move(kept);
  }
  for (const Connection& c : connections) ::close(c.fd);
}

TcpStore::TcpStore(const std::string& host, int port, int rank, std::chrono::milliseconds timeout)
    : timeout_(timeout), where_(host + ":" + std::to_string(port)) {
  const auto deadline = Clock::now() + timeout;
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  MF_CHECK(rc == 0 && found != nullptr, InvalidArgument, "rendezvous: MS_SCHED_HOST '", echo(host),
           "' is not an address or a known host name (", ::gai_strerror(rc), ")");
  std::string last_error;
  while (fd_ < 0) {
    for (addrinfo* a = found; a != nullptr && fd_ < 0; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        last_error = std::strerror(errno);
        ::close(fd);
      }
    }
    if (fd_ >= 0) break;
    if (Clock::now() >= deadline) {
      ::freeaddrinfo(found);
      MF_FAIL(Unavailable, "rendezvous: worker ", rank, " found no server at ", echo(where_),
              " within ", timeout.count() / 1000.0, " s (", last_error,
              "); worker 0 serves it: is it running, and are MS_SCHED_HOST and MS_SCHED_PORT the "
              "same for every worker?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::freeaddrinfo(found);
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  request('H', std::to_string(rank), {});
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<char> TcpStore::request(char op, const std::string& key,
                                    const std::vector<char>& value) {
  std::lock_guard lock(mutex_);
  MF_CHECK(fd_ >= 0, Unavailable, "the rendezvous server at ", echo(where_), " is gone");
  try {
    send_all(fd_, encode(op, key, value));
    char size_bytes[4];
    const auto deadline = Clock::now() + timeout_;
    recv_all(fd_, size_bytes, 4, deadline);
    const uint32_t size = get_u32(size_bytes);
    MF_CHECK(size <= kMaxValue + 1, DataLoss, "the rendezvous server sent a malformed reply");
    std::vector<char> reply(size);
    if (size > 0) recv_all(fd_, reply.data(), size, deadline);
    return reply;
  } catch (const Error&) {
    // A half-read reply would shift every later one: the connection is finished.
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  request('S', key, data);
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::vector<char> reply = request('G', key, {});
  MF_CHECK(!reply.empty() && reply[0] == 1, Internal, "rendezvous: key vanished");
  return {reply.begin() + 1, reply.end()};
}

void TcpStore::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void TcpStore::wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const std::vector<bool> present = check(keys);
    bool all = true;
    for (bool p : present) all = all && p;
    if (all) return;
    MF_CHECK(fd_ >= 0, Unavailable, "rendezvous: the server at ", echo(where_),
             " is gone (worker 0 serves it; did it stop?)");
    if (Clock::now() >= deadline) {
      size_t missing = 0;
      while (missing < keys.size() && present[missing]) ++missing;
      MF_FAIL(Unavailable, "rendezvous: waited ", timeout.count() / 1000.0, " s for '",
              echo(keys[missing]), "' at ", echo(where_),
              "; a worker did not come (is every worker started, with the same MS_WORKER_NUM?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<bool> TcpStore::check(const std::vector<std::string>& keys) {
  std::string joined;
  for (size_t i = 0; i < keys.size(); ++i) joined += (i ? std::string(1, '\0') : "") + keys[i];
  std::vector<char> reply;
  try {
    reply = request('Q', joined, {});
  } catch (const Error&) {
    return std::vector<bool>(keys.size(), false);
  }
  std::vector<bool> present(keys.size(), false);
  for (size_t i = 0; i < keys.size() && i < reply.size(); ++i) present[i] = reply[i] == 1;
  return present;
}

void TcpStore::goodbye() {
  try {
    request('B', "", {});
  } catch (const Error&) {
  }
}

}  // namespace mf::runtime::comm
