// seqbus-cpp-fuzz: a seeded mutational fuzz driver of the C++ codecs (built under
// AddressSanitizer and UndefinedBehaviorSanitizer, so a read outside a buffer or undefined
// behaviour stops it with a report).
//
// Seeds: every vector of schemas/vectors and random messages of the all-types schema written
// by the builders. Each input is a seed mutated 1 to 4 times (bit flips, interesting bytes,
// u16/u32 length and count fields set to edge values, header fields, truncation, appended,
// inserted, deleted or duplicated bytes, splices of two seeds), copied into a buffer of exactly
// its size and decoded with its package's decode(), every field read (to_json). Anything but
// a decode_error is a finding; so is a message that decodes but whose re-encoding does not
// decode to the same JSON and the same bytes, or whose encoded_size is wrong. Inputs that
// decode join the seeds (up to a bound). Exit status 0 with no finding, 1 with one (the input's
// hex printed), 2 on a wrong command line.
//
//   seqbus-cpp-fuzz --vectors schemas/vectors [--inputs N] [--seed S]
#include "../packages.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <typeinfo>
#include <vector>

namespace {

namespace t = seqbus::codec::testing;
using bytes_t = std::vector<std::uint8_t>;

/// splitmix64: the same seeded generator the project's Rust core uses.
struct rng {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n) (n > 0).
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  bool chance(unsigned percent) { return below(100) < percent; }
};

struct seed {
  std::string package;
  bytes_t bytes;
};

std::string hex(const bytes_t& b) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (auto x : b) {
    out += digits[x >> 4];
    out += digits[x & 15];
  }
  return out;
}

[[noreturn]] void finding(const std::string& what, const std::string& package, const bytes_t& b) {
  std::fprintf(stderr, "seqbus-cpp-fuzz: FINDING: %s\n  package %s, input (%zu bytes): %s\n",
               what.c_str(), package.c_str(), b.size(), hex(b).c_str());
  std::exit(1);
}

// -- random messages of the all-types schema ------------------------------------------------

std::string random_ascii(rng& r, std::size_t max) {
  std::string s(r.below(max + 1), ' ');
  for (auto& c : s) c = static_cast<char>(0x21 + r.below(0x5e));  // '!'..'~'
  return s;
}

std::string random_utf8(rng& r, std::size_t max) {
  static const char* const pieces[] = {"a", "Z", " ", "\"", "\\", "\n", "\x01", "\xc3\xa9",
                                       "\xe2\x9c\x93", "\xf0\x9f\x98\x80", "\x7f"};
  std::string s;
  const std::size_t n = r.below(max + 1);
  for (std::size_t i = 0; i < n; ++i) s += pieces[r.below(std::size(pieces))];
  return s;
}

bytes_t random_bytes(rng& r, std::size_t max) {
  bytes_t b(r.below(max + 1));
  for (auto& x : b) x = static_cast<std::uint8_t>(r.next());
  return b;
}

double random_double(rng& r) {
  switch (r.below(6)) {
    case 0: return 0.0;
    case 1: return -0.0;
    case 2: return std::numeric_limits<double>::infinity();
    case 3: return std::numeric_limits<double>::quiet_NaN();
    case 4: return static_cast<double>(static_cast<std::int64_t>(r.next())) / 1e6;
    default: {
      const std::uint64_t bits = r.next();
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
  }
}

float random_float(rng& r) {
  switch (r.below(4)) {
    case 0: return 0.0f;
    case 1: return std::numeric_limits<float>::quiet_NaN();
    case 2: return static_cast<float>(static_cast<std::int32_t>(r.next())) / 1e3f;
    default: {
      const auto bits = static_cast<std::uint32_t>(r.next());
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
  }
}

template <class T>
T random_int(rng& r) {
  switch (r.below(4)) {
    case 0: return std::numeric_limits<T>::min();
    case 1: return std::numeric_limits<T>::max();
    case 2: return T{0};
    default: return static_cast<T>(r.next());
  }
}

alltypes::Color random_color(rng& r) {
  static const alltypes::Color all[] = {alltypes::Color::Red, alltypes::Color::Green,
                                        alltypes::Color::Blue};
  return all[r.below(3)];
}

void random_outer(rng& r, alltypes::OuterBuilder o) {
  o.inner().a(random_int<std::uint8_t>(r)).b(random_float(r));
  o.tag(random_ascii(r, 3)).raw(random_bytes(r, 2)).ok(r.chance(50));
}

bytes_t random_everything(rng& r) {
  bytes_t buf(4096);
  alltypes::EverythingBuilder b(buf.data(), buf.size());
  b.b(r.chance(50))
      .u8v(random_int<std::uint8_t>(r))
      .u16v(random_int<std::uint16_t>(r))
      .u32v(random_int<std::uint32_t>(r))
      .u64v(random_int<std::uint64_t>(r))
      .i8v(random_int<std::int8_t>(r))
      .i16v(random_int<std::int16_t>(r))
      .i32v(random_int<std::int32_t>(r))
      .i64v(random_int<std::int64_t>(r))
      .f32v(random_float(r))
      .f64v(random_double(r))
      .name(random_ascii(r, 6))
      .raw(random_bytes(r, 4))
      .color(random_color(r))
      .perm(alltypes::Perm{random_int<std::uint32_t>(r)});
  random_outer(r, b.outer());
  if (r.chance(50)) b.o_u64(random_int<std::uint64_t>(r));
  if (r.chance(50)) b.o_color(random_color(r));
  if (r.chance(50)) random_outer(r, b.o_outer());
  if (r.chance(50)) b.o_f64(random_double(r));
  if (r.chance(50)) b.o_char(random_ascii(r, 2));
  if (r.chance(80)) {
    auto items = b.items();
    for (std::size_t i = r.below(4); i > 0; --i) {
      auto e = items.next();
      e.id(random_int<std::uint32_t>(r));
      if (r.chance(70)) {
        auto sub = e.sub();
        for (std::size_t k = r.below(4); k > 0; --k) {
          auto s = sub.next();
          s.v(random_int<std::int64_t>(r));
          if (r.chance(70)) s.blob(random_bytes(r, 8));
        }
      }
      if (r.chance(70)) e.label(random_utf8(r, 6));  // after the entry's group
      if (r.chance(50)) e.note(random_int<std::int16_t>(r));
    }
  }
  if (r.chance(50)) {
    auto empty = b.empty();
    for (std::size_t i = r.below(4); i > 0; --i) empty.next();
  }
  if (r.chance(80)) b.text(random_utf8(r, 10));
  if (r.chance(80)) b.data(random_bytes(r, 10));
  buf.resize(b.finish());
  return buf;
}

// -- mutations ------------------------------------------------------------------------------

const std::uint32_t INTERESTING[] = {0,    1,      2,      3,      4,          7,         8,
                                     16,   0x7f,   0x80,   0xff,   0x100,      0x7fff,    0x8000,
                                     0xffff, 0x10000, 0x7fffffff, 0x80000000u, 0xfffffffeu,
                                     0xffffffffu};

void mutate(rng& r, bytes_t& b, const std::vector<seed>& seeds, const std::string& package) {
  switch (r.below(11)) {
    case 0:  // flip a bit
      if (!b.empty()) b[r.below(b.size())] ^= static_cast<std::uint8_t>(1u << r.below(8));
      break;
    case 1: {  // an interesting byte
      if (b.empty()) break;
      static const std::uint8_t vals[] = {0, 1, 2, 0x20, 0x7f, 0x80, 0xc3, 0xff};
      b[r.below(b.size())] = r.chance(50) ? vals[r.below(std::size(vals))]
                                          : static_cast<std::uint8_t>(r.next());
      break;
    }
    case 2: {  // a u16 or u32 (a length, count or block length) set to an edge value
      const std::size_t width = r.chance(50) ? 2 : 4;
      if (b.size() < width) break;
      const std::size_t at = r.below(b.size() - width + 1);
      std::uint32_t v = INTERESTING[r.below(std::size(INTERESTING))];
      if (r.chance(30)) v = static_cast<std::uint32_t>(b.size() - at + r.below(9) - 4);
      if (width == 2) {
        seqbus::codec::detail::store(b.data() + at, static_cast<std::uint16_t>(v));
      } else {
        seqbus::codec::detail::store(b.data() + at, v);
      }
      break;
    }
    case 3: {  // a header field: block length, template id, schema id or version
      if (b.size() < 8) break;
      const std::size_t at = 2 * r.below(4);
      seqbus::codec::detail::store(
          b.data() + at, static_cast<std::uint16_t>(r.chance(50) ? r.below(12)
                                                                 : INTERESTING[r.below(14)]));
      break;
    }
    case 4:  // truncate
      b.resize(r.below(b.size() + 1));
      break;
    case 5: {  // append
      const bytes_t tail = random_bytes(r, 16);
      b.insert(b.end(), tail.begin(), tail.end());
      break;
    }
    case 6: {  // insert
      const bytes_t mid = random_bytes(r, 8);
      const std::size_t at = r.below(b.size() + 1);
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), mid.begin(), mid.end());
      break;
    }
    case 7: {  // delete a range
      if (b.empty()) break;
      const std::size_t at = r.below(b.size());
      const std::size_t n = 1 + r.below(std::min<std::size_t>(8, b.size() - at));
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
              b.begin() + static_cast<std::ptrdiff_t>(at + n));
      break;
    }
    case 8: {  // duplicate a chunk in place
      if (b.empty()) break;
      const std::size_t at = r.below(b.size());
      const std::size_t n = 1 + r.below(std::min<std::size_t>(16, b.size() - at));
      const bytes_t chunk(b.begin() + static_cast<std::ptrdiff_t>(at),
                          b.begin() + static_cast<std::ptrdiff_t>(at + n));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), chunk.begin(), chunk.end());
      break;
    }
    case 9: {  // splice: this one's beginning, another seed's end (same package)
      const seed& other = seeds[r.below(seeds.size())];
      if (other.package != package || other.bytes.empty()) break;
      const std::size_t cut = r.below(b.size() + 1);
      const std::size_t from = r.below(other.bytes.size());
      b.resize(cut);
      b.insert(b.end(), other.bytes.begin() + static_cast<std::ptrdiff_t>(from),
               other.bytes.end());
      break;
    }
    default: {  // a run of random bytes over the input
      if (b.empty()) break;
      const std::size_t at = r.below(b.size());
      const std::size_t n = 1 + r.below(std::min<std::size_t>(4, b.size() - at));
      for (std::size_t i = 0; i < n; ++i) b[at + i] = static_cast<std::uint8_t>(r.next());
    }
  }
}

std::vector<seed> load_vectors(const std::string& dir) {
  std::vector<seed> out;
  for (const auto& pkg : std::filesystem::directory_iterator(dir)) {
    if (!pkg.is_directory()) continue;
    const std::string name = pkg.path().filename().string();
    if (!t::known_package(name)) continue;
    for (const auto& f : std::filesystem::directory_iterator(pkg.path())) {
      if (f.path().extension() != ".bin") continue;
      std::ifstream in(f.path(), std::ios::binary);
      out.push_back({name, bytes_t(std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>())});
    }
  }
  return out;
}

/// Decodes one input; returns true if it decoded. Exits on a finding.
bool check(const std::string& package, const bytes_t& input) {
  const bytes_t exact(input);  // exactly its size: a read past its end leaves the allocation
  t::decoded d;
  try {
    d = t::decode_package(package, exact);
  } catch (const seqbus::codec::decode_error&) {
    return false;
  } catch (const std::exception& e) {
    finding(std::string("decoding threw ") + typeid(e).name() + ": " + e.what(), package, input);
  }
  if (d.encoded_size != d.bytes.size()) {
    finding("encoded_size " + std::to_string(d.encoded_size) + " but " +
                std::to_string(d.bytes.size()) + " bytes written",
            package, input);
  }
  if (d.wire_size > input.size()) finding("wire_size past the input", package, input);
  try {
    const t::decoded again = t::decode_package(package, d.bytes);
    if (again.json != d.json) {
      finding("written again, it reads " + again.json + " instead of " + d.json, package, input);
    }
    if (again.bytes != d.bytes) finding("writing again changes the bytes", package, input);
  } catch (const std::exception& e) {
    finding(std::string("the re-encoded message does not decode: ") + e.what(), package, input);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t inputs = 100000;
  std::uint64_t seed_value = 1;
  std::string vectors;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--inputs") {
      inputs = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (key == "--seed") {
      seed_value = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (key == "--vectors") {
      vectors = argv[i + 1];
    } else {
      argc = 0;
    }
  }
  if (argc % 2 != 1 || vectors.empty()) {
    std::fprintf(stderr,
                 "usage: seqbus-cpp-fuzz --vectors DIR [--inputs N] [--seed S]\n");
    return 2;
  }
  rng r{seed_value};
  std::vector<seed> seeds = load_vectors(vectors);
  if (seeds.empty()) {
    std::fprintf(stderr, "seqbus-cpp-fuzz: no vectors under %s\n", vectors.c_str());
    return 2;
  }
  const std::size_t vector_count = seeds.size();
  for (int i = 0; i < 64; ++i) seeds.push_back({"alltypes", random_everything(r)});
  std::fprintf(stderr,
               "seqbus-cpp-fuzz: %llu inputs, seed %llu, %zu vectors and 64 random all-types "
               "messages as seeds\n",
               static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(seed_value),
               vector_count);
  for (const auto& s : seeds) {
    if (!check(s.package, s.bytes)) finding("a seed does not decode", s.package, s.bytes);
  }
  const std::size_t max_seeds = seeds.size() + 2000;
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t decoded = 0;
  const std::uint64_t step = inputs >= 10 ? inputs / 10 : 1;
  for (std::uint64_t n = 1; n <= inputs; ++n) {
    seed s;
    if (r.chance(5)) {
      s = {"alltypes", random_everything(r)};
    } else {
      s = seeds[r.below(seeds.size())];
    }
    for (std::size_t k = 1 + r.below(4); k > 0; --k) mutate(r, s.bytes, seeds, s.package);
    // now and then, another package's decoder on the same bytes
    const std::string package =
        r.chance(3) ? std::string(t::PACKAGES[r.below(t::PACKAGES.size())]) : s.package;
    if (check(package, s.bytes)) {
      ++decoded;
      if (package == s.package && seeds.size() < max_seeds && r.chance(10)) {
        seeds.push_back(s);
      }
    }
    if (n % step == 0) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "seqbus-cpp-fuzz: %llu inputs, %llu decoded, %zu seeds, %.1f s\n",
                   static_cast<unsigned long long>(n), static_cast<unsigned long long>(decoded),
                   seeds.size(), secs);
    }
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("seqbus-cpp-fuzz: %llu inputs (%llu decoded, %llu refused with decode_error), "
              "seed %llu, %.1f s: no finding\n",
              static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(decoded),
              static_cast<unsigned long long>(inputs - decoded),
              static_cast<unsigned long long>(seed_value), secs);
  return 0;
}
