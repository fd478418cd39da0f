// BLAKE2b (RFC 7693) with a digest of 1 to 64 bytes and no key: what Python's
// hashlib.blake2b(digest_size=N) computes, for the digests the exchange example reports.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace example {

class Blake2b {
 public:
  explicit Blake2b(std::size_t digest_size = 64) : out_len_(digest_size) {
    h_ = IV;
    h_[0] ^= 0x01010000ULL ^ static_cast<std::uint64_t>(digest_size);
  }

  void update(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      if (fill_ == 128) {  // a full block with more to come: compress it
        t_ += 128;
        compress(false);
        fill_ = 0;
      }
      buf_[fill_++] = p[i];
    }
  }

  /// The digest as lowercase hex (Python's hexdigest()); the hash is finished by it.
  std::string hexdigest() {
    t_ += fill_;
    std::memset(buf_.data() + fill_, 0, 128 - fill_);
    compress(true);
    static const char* hex = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < out_len_; ++i) {
      auto b = static_cast<std::uint8_t>(h_[i / 8] >> (8 * (i % 8)));
      s += hex[b >> 4];
      s += hex[b & 15];
    }
    return s;
  }

 private:
  static constexpr std::array<std::uint64_t, 8> IV = {
      0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
      0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};

  static std::uint64_t rotr(std::uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

  void compress(bool last) {
    static constexpr std::uint8_t SIGMA[12][16] = {
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
        {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
        {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
        {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
        {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
        {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
        {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
        {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
        {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
        {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
        {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};
    std::uint64_t m[16], v[16];
    for (int i = 0; i < 16; ++i) {
      m[i] = 0;
      for (int j = 0; j < 8; ++j) m[i] |= std::uint64_t{buf_[static_cast<std::size_t>(8 * i + j)]} << (8 * j);
    }
    for (int i = 0; i < 8; ++i) {
      v[i] = h_[static_cast<std::size_t>(i)];
      v[i + 8] = IV[static_cast<std::size_t>(i)];
    }
    v[12] ^= t_;  // messages shorter than 2**64 bytes: the high word of the counter stays 0
    if (last) v[14] = ~v[14];
    auto g = [&](int a, int b, int c, int d, std::uint64_t x, std::uint64_t y) {
      v[a] = v[a] + v[b] + x;
      v[d] = rotr(v[d] ^ v[a], 32);
      v[c] = v[c] + v[d];
      v[b] = rotr(v[b] ^ v[c], 24);
      v[a] = v[a] + v[b] + y;
      v[d] = rotr(v[d] ^ v[a], 16);
      v[c] = v[c] + v[d];
      v[b] = rotr(v[b] ^ v[c], 63);
    };
    for (const auto& s : SIGMA) {
      g(0, 4, 8, 12, m[s[0]], m[s[1]]);
      g(1, 5, 9, 13, m[s[2]], m[s[3]]);
      g(2, 6, 10, 14, m[s[4]], m[s[5]]);
      g(3, 7, 11, 15, m[s[6]], m[s[7]]);
      g(0, 5, 10, 15, m[s[8]], m[s[9]]);
      g(1, 6, 11, 12, m[s[10]], m[s[11]]);
      g(2, 7, 8, 13, m[s[12]], m[s[13]]);
      g(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (std::size_t i = 0; i < 8; ++i) h_[i] ^= v[i] ^ v[i + 8];
  }

  std::array<std::uint64_t, 8> h_;
  std::array<std::uint8_t, 128> buf_{};
  std::size_t fill_ = 0;
  std::uint64_t t_ = 0;
  std::size_t out_len_;
};

}  // namespace example
