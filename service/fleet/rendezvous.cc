#include "service/fleet/rendezvous.h"

namespace egress::fleet {
namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

uint64_t Fnv1a(uint64_t hash, absl::string_view bytes) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= kFnvPrime;
  }
  return hash;
}

uint64_t SplitMix64Finalizer(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t RendezvousWeight(absl::string_view member, absl::string_view origin) {
  uint64_t hash = Fnv1a(kFnvOffset, member);
  hash = Fnv1a(hash, absl::string_view("\0", 1));  // "ab"+"c" and "a"+"bc" differ
  return SplitMix64Finalizer(Fnv1a(hash, origin));
}

absl::string_view OwnerOf(const std::vector<std::string>& members, absl::string_view origin) {
  const std::string* owner = nullptr;
  uint64_t owner_weight = 0;
  for (const std::string& member : members) {
    const uint64_t weight = RendezvousWeight(member, origin);
    if (!owner || weight > owner_weight || (weight == owner_weight && member < *owner)) {
      owner = &member;
      owner_weight = weight;
    }
  }
  return owner ? absl::string_view(*owner) : absl::string_view();
}

}  // namespace egress::fleet
