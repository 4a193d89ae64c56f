#pragma once
// The fingerprint of everything that changes what a compilation produces: every key the key tables
// mark compile-relevant plus the derived Policy decisions. The compile cache keys entries by it.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "context/context.h"
#include "context/policy.h"

namespace mf::context {

// A stable 64-bit FNV-1a hash and the readable components it was computed from, in a fixed order,
// so a cache can say which component differs. Equal components always give equal hashes.
struct Fingerprint {
  std::uint64_t hash = 0;
  std::vector<std::pair<std::string, std::string>> components;  // name -> canonical value

  std::string hex() const;  // 16 lowercase hex digits
  bool operator==(const Fingerprint& other) const { return hash == other.hash; }
};

// Walks the key tables (so a key marked compile-relevant cannot be forgotten) and the Policy.
Fingerprint fingerprint(const Snapshot& snapshot, const Policy& policy);

// Names of the components whose values differ between a and b (or exist in one only).
std::vector<std::string> differing_components(const Fingerprint& a, const Fingerprint& b);

}  // namespace mf::context
