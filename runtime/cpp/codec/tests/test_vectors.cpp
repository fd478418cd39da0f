// The shared vectors (schemas/vectors): every message decodes to its canonical JSON and is
// written again byte for byte; every truncation of it, and each kind of corruption, is a
// decode_error naming what is wrong.
#include "../packages.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace t = seqbus::codec::testing;
using seqbus::codec::decode_error;

struct vector_file {
  std::string package;
  std::string name;  // the message's name (file name up to the first dot)
  std::string path;
  std::vector<std::uint8_t> bin;
  std::string json;
};

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::vector<vector_file> all_vectors() {
  std::vector<vector_file> out;
  for (const auto& pkg : fs::directory_iterator(SEQBUS_VECTORS)) {
    if (!pkg.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(pkg.path())) {
      if (f.path().extension() != ".bin") continue;
      vector_file v;
      v.package = pkg.path().filename().string();
      v.path = f.path().string();
      const std::string file = f.path().filename().string();
      v.name = file.substr(0, file.find('.'));
      const std::string bin = read_text(f.path());
      v.bin.assign(bin.begin(), bin.end());
      v.json = read_text(fs::path(f.path()).replace_extension(".json"));
      while (!v.json.empty() && (v.json.back() == '\n' || v.json.back() == '\r')) {
        v.json.pop_back();
      }
      out.push_back(std::move(v));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const vector_file& a, const vector_file& b) { return a.path < b.path; });
  return out;
}

const vector_file& find(const std::vector<vector_file>& all, const std::string& package,
                        const std::string& file) {
  for (const auto& v : all) {
    if (v.package == package && fs::path(v.path).filename() == file) return v;
  }
  throw std::runtime_error("no vector " + package + "/" + file);
}

/// The decode error `bytes` give as a message of `package` (every field read), or "" when
/// they decode.
std::string error_of(const std::string& package, const std::vector<std::uint8_t>& bytes) {
  const std::vector<std::uint8_t> exact(bytes);  // nothing readable past its end
  try {
    t::decode_package(package, exact);
  } catch (const decode_error& e) {
    return e.what();
  }
  return "";
}

TEST(Vectors, EveryPackageHasVectors) {
  const auto all = all_vectors();
  for (const char* p : {"bus", "exchange", "pingpong"}) {
    EXPECT_TRUE(std::any_of(all.begin(), all.end(),
                            [p](const vector_file& v) { return v.package == p; }))
        << p;
  }
  EXPECT_GE(all.size(), 15u);
}

TEST(Vectors, EachDecodesToItsJsonAndIsWrittenAgainByteForByte) {
  for (const auto& v : all_vectors()) {
    SCOPED_TRACE(v.path);
    const std::vector<std::uint8_t> exact(v.bin);
    const t::decoded d = t::decode_package(v.package, exact);
    EXPECT_EQ(d.name, v.name);
    EXPECT_EQ(d.json, v.json);
    EXPECT_EQ(d.bytes, v.bin);
    EXPECT_EQ(d.wire_size, v.bin.size());
    EXPECT_EQ(d.encoded_size, v.bin.size());
  }
}

TEST(Vectors, EveryTruncationIsADecodeError) {
  std::size_t cases = 0;
  for (const auto& v : all_vectors()) {
    for (std::size_t n = 0; n < v.bin.size(); ++n) {
      SCOPED_TRACE(v.path + " cut to " + std::to_string(n) + " bytes");
      const std::vector<std::uint8_t> cut(v.bin.begin(),
                                          v.bin.begin() + static_cast<std::ptrdiff_t>(n));
      EXPECT_NE(error_of(v.package, cut), "");
      ++cases;
    }
  }
  EXPECT_GT(cases, 500u);
}

TEST(Vectors, BytesAfterTheMessageAreNotPartOfIt) {
  const auto all = all_vectors();
  const auto& v = find(all, "exchange", "NewOrder.1.bin");
  std::vector<std::uint8_t> longer = v.bin;
  longer.push_back(0xee);
  const t::decoded d = t::decode_package("exchange", longer);
  EXPECT_EQ(d.json, v.json);
  EXPECT_EQ(d.wire_size, v.bin.size());
  EXPECT_EQ(d.bytes, v.bin);
}

TEST(Vectors, AnotherSchemasMessageIsRefused) {
  const auto all = all_vectors();
  auto bytes = find(all, "exchange", "NewOrder.1.bin").bin;
  bytes[4] = 8;  // schema id 8
  EXPECT_EQ(error_of("exchange", bytes),
            "cannot decode exchange.header at offset 4: schema id 8, expected 7");
  // a message of the bus schema given to the exchange package
  EXPECT_EQ(error_of("exchange", find(all, "bus", "Epoch.1.bin").bin),
            "cannot decode exchange.header at offset 4: schema id 1, expected 7");
}

TEST(Vectors, AnUnknownTemplateIdIsRefused) {
  const auto all = all_vectors();
  auto bytes = find(all, "exchange", "NewOrder.1.bin").bin;
  bytes[2] = 0xe7;
  bytes[3] = 0x03;  // 999
  EXPECT_EQ(error_of("exchange", bytes),
            "cannot decode exchange.header at offset 2: unknown template id 999");
  // a view of one message refuses another's
  const auto& accepted = find(all, "exchange", "OrderAccepted.1.bin").bin;
  EXPECT_THROW(exchange::NewOrderView(accepted.data(), accepted.size()), decode_error);
  try {
    exchange::NewOrderView(accepted.data(), accepted.size());
  } catch (const decode_error& e) {
    EXPECT_EQ(e.where(), "NewOrder");
    EXPECT_EQ(e.field(), "header");
    EXPECT_EQ(e.offset(), 2u);
    EXPECT_EQ(e.detail(), "template id 2, expected 1");
  }
}

TEST(Vectors, BlockLengthsOutsideTheBufferOrBelowTheFirstVersionAreRefused) {
  const auto all = all_vectors();
  auto bytes = find(all, "exchange", "NewOrder.1.bin").bin;
  bytes[0] = 10;
  bytes[1] = 0;
  EXPECT_EQ(error_of("exchange", bytes),
            "cannot decode NewOrder.header at offset 0: block length 10 is shorter than 45");
  bytes[0] = 0xff;
  bytes[1] = 0xff;
  EXPECT_EQ(error_of("exchange", bytes),
            "cannot decode NewOrder.header at offset 0: block of 65535 bytes runs past the "
            "end of the buffer");
}

// NewOrder.1: header 8, block 54, section header 2; legs at 64 (count at 68), its first
// entry at 72 (block 11, then fills at 83); account and memo are the last 12 + 8 bytes.
TEST(Vectors, GroupCountsAndLengthsPastTheEndAreRefused) {
  const auto all = all_vectors();
  const auto& order = find(all, "exchange", "NewOrder.1.bin").bin;
  const std::size_t n = order.size();
  for (std::uint32_t count : {3u, 1000u, 0xffffffffu}) {
    auto bytes = order;
    seqbus::codec::detail::store<std::uint32_t>(bytes.data() + 68, count);
    EXPECT_NE(error_of("exchange", bytes), "") << count;
  }
  auto bytes = order;
  seqbus::codec::detail::store<std::uint32_t>(bytes.data() + 87, 0x10000000u);  // fills
  EXPECT_EQ(error_of("exchange", bytes),
            "cannot decode NewOrder.legs at offset 91: group of 268435456 entries runs past "
            "the end of the buffer");
  bytes = order;
  seqbus::codec::detail::store<std::uint16_t>(bytes.data() + 64, 0xffff);  // legs' entry size
  EXPECT_NE(error_of("exchange", bytes), "");
  // BookUpdate.1: block 16, levels at 26, entries of 22 bytes
  auto book = find(all, "exchange", "BookUpdate.1.bin").bin;
  seqbus::codec::detail::store<std::uint16_t>(book.data() + 26, 5);  // below its 22 bytes
  EXPECT_EQ(error_of("exchange", book),
            "cannot decode BookUpdate.levels at offset 26: entry block length 5 is shorter "
            "than 22");
  for (std::uint32_t len : {5u, 9u, 0x7fffffffu, 0xffffffffu}) {
    bytes = order;
    seqbus::codec::detail::store<std::uint32_t>(bytes.data() + n - 8, len);  // memo
    EXPECT_NE(error_of("exchange", bytes), "") << len;
  }
  for (std::uint32_t len : {16u, 17u, 0x7fffffffu, 0xffffffffu}) {
    bytes = order;
    seqbus::codec::detail::store<std::uint32_t>(bytes.data() + n - 20, len);  // account
    EXPECT_NE(error_of("exchange", bytes), "") << len;
  }
  bytes = order;
  bytes[63] = 0;  // no variable-length fields: the 20 bytes after the groups are not read
  const t::decoded d = t::decode_package("exchange", bytes);
  EXPECT_EQ(d.wire_size, n - 20);
  EXPECT_NE(d.json.find(R"("account":"","memo":"")"), std::string::npos);
  bytes[63] = 3;  // three: the third runs past the end
  EXPECT_NE(error_of("exchange", bytes), "");
}

TEST(Vectors, CorruptValuesAreRefusedWhenRead) {
  const auto all = all_vectors();
  const auto& order = find(all, "exchange", "NewOrder.1.bin").bin;
  auto bytes = order;
  bytes[8 + 20] = 9;  // side
  const exchange::NewOrderView v(bytes.data(), bytes.size());  // the structure is sound
  EXPECT_EQ(v.order_id(), 42u);
  try {
    (void)v.side();
    ADD_FAILURE() << "no error";
  } catch (const decode_error& e) {
    EXPECT_EQ(e.field(), "side");
    EXPECT_EQ(e.offset(), 28u);
    EXPECT_STREQ(e.what(), "cannot decode NewOrder.side at offset 28: 9 is not a value of Side");
  }
  bytes = order;
  bytes[8 + 34] = 2;  // stop_price's presence
  EXPECT_EQ(error_of("exchange", bytes),
            "cannot decode NewOrder.stop_price at offset 42: presence byte is 2, not 0 or 1");
  bytes = order;
  bytes[8 + 13] = 0xc3;  // symbol
  EXPECT_EQ(error_of("exchange", bytes),
            "cannot decode NewOrder.symbol at offset 21: char field holds a non-ASCII byte");
  bytes = order;
  bytes[72 + 10] = 0;  // the first leg's side
  EXPECT_EQ(error_of("exchange", bytes),
            "cannot decode NewOrder.legs.side at offset 82: 0 is not a value of Side");
  bytes = order;
  bytes[order.size() - 16] = 0xff;  // inside account
  EXPECT_EQ(error_of("exchange", bytes),
            "cannot decode NewOrder.account at offset " + std::to_string(order.size() - 16) +
                ": string is not valid UTF-8");
}

TEST(Vectors, DispatchCallsTheViewOfTheMessage) {
  const auto all = all_vectors();
  for (const auto& v : all) {
    if (v.package != "exchange") continue;
    const std::string name = exchange::dispatch(
        v.bin, [](const auto& view) { return std::string(view.NAME) + ":" + to_json(view); });
    EXPECT_EQ(name, v.name + ":" + v.json);
    EXPECT_STREQ(exchange::name(exchange::decode(v.bin)), v.name.c_str());
  }
}

}  // namespace
