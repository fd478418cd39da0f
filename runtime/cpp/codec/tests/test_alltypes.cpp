// Every kind of field (the all-types schema): builders write what the Python codecs write
// (golden bytes below were written by them), views read it back, the canonical JSON matches;
// builders refuse what the wire cannot carry and writes out of order; corrupt values are
// refused when read.
#include "alltypes.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using seqbus::codec::byte_view;
using seqbus::codec::decode_error;
using seqbus::codec::encode_error;

std::vector<std::uint8_t> unhex(const std::string& h) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// The Rust codecs' test value (rust/crates/codecs/tests/alltypes.rs), encoded by the Python
// codecs, and its canonical JSON.
const char* const EVERYTHING_HEX =
    "6a0001005a00010001ffffffffffffffffffffffffffffff80008000000080000000000000008000006040"
    "000000000000d0bf4142434445460001feff2c0101000080ff0000c0bf58595aabcd010107000000000000"
    "0001ffff01ff0000c0bf5100000102010000000000000000000168690202070001010200000001000000"
    "01fdff0800000102000000ffffffffffffffff0300000009090902000000000000000000000006000000c3"
    "a920e29c9302000000000000080000010000000000000000000000000200000004000000746578740300"
    "0000010203";
const char* const EVERYTHING_JSON =
    R"({"b":true,"u8v":255,"u16v":65535,"u32v":4294967295,"u64v":18446744073709551615,)"
    R"("i8v":-128,"i16v":-32768,"i32v":-2147483648,"i64v":-9223372036854775808,"f32v":3.5,)"
    R"("f64v":-0.25,"name":"ABCDEF","raw":"0001feff","color":"Blue","perm":2147483649,)"
    R"("outer":{"inner":{"a":255,"b":-1.5},"tag":"XYZ","raw":"abcd","ok":true},"o_u64":7,)"
    R"("o_color":"Red","o_outer":{"inner":{"a":255,"b":-1.5},"tag":"Q","raw":"0102","ok":true},)"
    R"("o_f64":null,"o_char":"hi","items":[{"id":1,"label":"é ✓","sub":[{"v":-1,)"
    R"("blob":"090909"},{"v":2,"blob":""}],"note":-3},{"id":2,"label":"","sub":[],)"
    R"("note":null}],"text":"text","data":"010203","empty":[{},{}]})";

void outer(alltypes::OuterBuilder o, std::string_view tag, std::vector<std::uint8_t> raw) {
  o.inner().a(255).b(-1.5f);
  o.tag(tag).raw(raw).ok(true);
}

/// Writes the value above into `buf`; returns its length.
std::size_t everything(std::uint8_t* buf, std::size_t cap) {
  alltypes::EverythingBuilder b(buf, cap);
  b.b(true)
      .u8v(255)
      .u16v(65535)
      .u32v(std::numeric_limits<std::uint32_t>::max())
      .u64v(std::numeric_limits<std::uint64_t>::max())
      .i8v(std::numeric_limits<std::int8_t>::min())
      .i16v(std::numeric_limits<std::int16_t>::min())
      .i32v(std::numeric_limits<std::int32_t>::min())
      .i64v(std::numeric_limits<std::int64_t>::min())
      .f32v(3.5f)
      .f64v(-0.25)
      .name("ABCDEF")
      .raw(std::vector<std::uint8_t>{0, 1, 0xfe, 0xff})
      .color(alltypes::Color::Blue)
      .perm(alltypes::Perm::Read | alltypes::Perm::Exec)
      .o_u64(7)
      .o_color(alltypes::Color::Red)
      .o_f64(std::nullopt)
      .o_char("hi");
  outer(b.outer(), "XYZ", {0xab, 0xcd});
  outer(b.o_outer(), "Q", {1, 2});
  auto items = b.items();
  auto first = items.next();
  first.id(1).note(-3);
  auto sub = first.sub();  // an entry's groups before its variable-length fields, too
  sub.next().v(-1).blob(std::string_view("\x09\x09\x09"));
  sub.next().v(2);  // blob left out: written empty
  first.label("é ✓");
  items.next().id(2);
  // the wire's order: the groups (items, empty), then the variable-length fields
  auto empty = b.empty();
  empty.next();
  empty.next();
  b.text("text").data(std::vector<std::uint8_t>{1, 2, 3});
  return b.finish();
}

TEST(AllTypes, BuildersWriteWhatThePythonCodecsWrite) {
  std::vector<std::uint8_t> buf(512);
  buf.resize(everything(buf.data(), buf.size()));
  EXPECT_EQ(buf, unhex(EVERYTHING_HEX));
}

TEST(AllTypes, ViewsReadEveryKindOfField) {
  const auto bytes = unhex(EVERYTHING_HEX);
  const alltypes::EverythingView v(bytes.data(), bytes.size());
  EXPECT_EQ(v.wire_version(), 1);
  EXPECT_EQ(v.wire_size(), bytes.size());
  EXPECT_TRUE(v.b());
  EXPECT_EQ(v.u64v(), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(v.i8v(), -128);
  EXPECT_EQ(v.f32v(), 3.5f);
  EXPECT_EQ(v.name(), "ABCDEF");
  EXPECT_EQ(v.raw(), byte_view(std::vector<std::uint8_t>{0, 1, 0xfe, 0xff}));
  EXPECT_EQ(v.color(), alltypes::Color::Blue);
  EXPECT_TRUE(v.perm().contains(alltypes::Perm::Exec));
  EXPECT_FALSE(v.perm().contains(alltypes::Perm::Write));
  EXPECT_EQ(v.outer().inner().a(), 255);
  EXPECT_EQ(v.outer().tag(), "XYZ");
  EXPECT_EQ(v.o_u64(), std::optional<std::uint64_t>(7));
  EXPECT_EQ(v.o_color(), std::optional<alltypes::Color>(alltypes::Color::Red));
  ASSERT_TRUE(v.o_outer().has_value());
  EXPECT_EQ(v.o_outer()->tag(), "Q");
  EXPECT_FALSE(v.o_f64().has_value());
  EXPECT_EQ(v.o_char(), std::optional<std::string_view>("hi"));
  ASSERT_EQ(v.items().size(), 2u);
  std::vector<std::int64_t> subs;
  for (const auto& item : v.items()) {
    for (const auto& s : item.sub()) subs.push_back(s.v());
  }
  EXPECT_EQ(subs, (std::vector<std::int64_t>{-1, 2}));
  EXPECT_EQ(v.items().begin()->label(), "é ✓");
  EXPECT_EQ(v.text(), "text");
  EXPECT_EQ(v.data().size(), 3u);
  EXPECT_EQ(v.empty().size(), 2u);
  // zero copy: what a view returns points into the buffer
  EXPECT_EQ(v.text().data(), reinterpret_cast<const char*>(bytes.data()) + bytes.size() - 11);
  EXPECT_EQ(to_json(v), EVERYTHING_JSON);
  EXPECT_EQ(alltypes::encode(v), bytes);
  EXPECT_EQ(alltypes::encoded_size(v), bytes.size());
}

TEST(AllTypes, AbsentAndZeroValuesAndFloatsAsPythonWritesThem) {
  // the Python codecs' bytes of a value with every optional absent but o_f64 (NaN), empty
  // groups and fields, f32 0.1 and f64 1e16
  const auto bytes = unhex(
      "6a0001005a00010000000000000000000000000000000000000000000000000000000000000000cdcccc3d"
      "0080e03779c3414300000000000000000000000000000000ff0000c0bf0000000000010000000000000000"
      "0000000000000000000000000000000001000000000000f87f00000002020700010100000000000000"
      "00000000000000000000000000");
  const alltypes::EverythingView v(bytes.data(), bytes.size());
  EXPECT_EQ(to_json(v),
            R"({"b":false,"u8v":0,"u16v":0,"u32v":0,"u64v":0,"i8v":0,"i16v":0,"i32v":0,)"
            R"("i64v":0,"f32v":0.10000000149011612,"f64v":1e+16,"name":"","raw":"00000000",)"
            R"("color":"Green","perm":0,"outer":{"inner":{"a":255,"b":-1.5},"tag":"",)"
            R"("raw":"0000","ok":true},"o_u64":null,"o_color":null,"o_outer":null,)"
            R"("o_f64":null,"o_char":null,"items":[],"text":"","data":"","empty":[]})");
  EXPECT_TRUE(std::isnan(*v.o_f64()));
  EXPECT_EQ(alltypes::encode(v), bytes);  // the NaN's bits kept
}

TEST(AllTypes, ADefaultViewReadsAsZeros) {
  const alltypes::EverythingView v;
  EXPECT_EQ(v.u64v(), 0u);
  EXPECT_EQ(v.name(), "");
  EXPECT_FALSE(v.o_outer().has_value());
  EXPECT_TRUE(v.items().empty());
  EXPECT_EQ(v.text(), "");
}

TEST(AllTypes, DispatchAndTheEmptyMessage) {
  std::uint8_t buf[16];
  alltypes::EmptyBuilder b(buf, sizeof buf);
  const std::size_t n = b.finish();
  EXPECT_EQ(n, 10u);
  const byte_view bytes(buf, n);
  EXPECT_EQ(alltypes::dispatch(bytes, [](const auto& v) { return std::string(v.NAME); }),
            "Empty");
  EXPECT_EQ(alltypes::to_json(alltypes::decode(bytes)), "{}");
  EXPECT_EQ(alltypes::encode(alltypes::decode(bytes)), std::vector<std::uint8_t>(buf, buf + n));
}

TEST(AllTypes, EveryTooSmallBufferIsAnEncodeError) {
  std::vector<std::uint8_t> full(512);
  const std::size_t n = everything(full.data(), full.size());
  for (std::size_t cap = 0; cap < n; ++cap) {
    SCOPED_TRACE(cap);
    std::vector<std::uint8_t> buf(cap);  // exactly cap bytes: a write past them is caught
    EXPECT_THROW(everything(buf.data(), buf.size()), encode_error);
  }
  std::vector<std::uint8_t> exact(n);
  EXPECT_EQ(everything(exact.data(), exact.size()), n);
  EXPECT_THROW(alltypes::EverythingBuilder(nullptr, 100), encode_error);
}

TEST(AllTypes, ValuesTheWireCannotCarryAreRefused) {
  std::vector<std::uint8_t> buf(512);
  alltypes::EverythingBuilder b(buf.data(), buf.size());
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const encode_error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message([&] { b.name("ABCDEFG"); }),
            R"(cannot encode Everything.name: "ABCDEFG" is longer than 6 characters)");
  EXPECT_EQ(message([&] { b.name("caf\xc3\xa9"); }),
            "cannot encode Everything.name: \"caf\xc3\xa9\" is not ASCII");
  EXPECT_EQ(message([&] { b.name("A "); }),
            R"(cannot encode Everything.name: "A " ends in padding (a space or a NUL), which )"
            "readers strip");
  EXPECT_EQ(message([&] { b.outer().tag(std::string_view("A\0", 2)); }),
            R"(cannot encode Outer.tag: "A\u0000" ends in padding (a space or a NUL), which )"
            "readers strip");
  EXPECT_EQ(message([&] { b.name("A B"); }), "");
  EXPECT_EQ(message([&] { b.raw(std::vector<std::uint8_t>(5)); }),
            "cannot encode Everything.raw: 5 bytes do not fit byte[4]");
  EXPECT_EQ(message([&] { b.color(static_cast<alltypes::Color>(7)); }),
            "cannot encode Everything.color: 7 is not a value of Color");
  EXPECT_EQ(message([&] { b.o_color(static_cast<alltypes::Color>(-2)); }),
            "cannot encode Everything.o_color: -2 is not a value of Color");
  EXPECT_EQ(message([&] { b.text("\xff"); }),
            "cannot encode Everything.text: the string is not valid UTF-8");
}

TEST(AllTypes, GroupsAndFieldsAreWrittenInOrderAndSkippedOnesEmpty) {
  std::vector<std::uint8_t> buf(512);
  {
    // nothing but the block: every group and field written empty by finish()
    alltypes::EverythingBuilder b(buf.data(), buf.size());
    const std::size_t n = b.finish();
    EXPECT_EQ(b.finish(), n);  // finishing again changes nothing
    const alltypes::EverythingView v(buf.data(), n);
    EXPECT_EQ(n, 8u + alltypes::EverythingView::BLOCK_LENGTH + 2 + 8 + 4 + 4 + 8);
    EXPECT_TRUE(v.items().empty());
    EXPECT_EQ(v.text(), "");
    EXPECT_THROW(b.text("late"), encode_error);  // after finish()
  }
  {
    // data before items and text: items and text written empty first
    alltypes::EverythingBuilder b(buf.data(), buf.size());
    b.data(std::string_view("xy"));
    EXPECT_THROW(b.items(), encode_error);  // items comes before data
    EXPECT_THROW(b.text("t"), encode_error);
    const std::size_t n = b.finish();
    const alltypes::EverythingView v(buf.data(), n);
    EXPECT_EQ(v.data().chars(), "xy");
    EXPECT_TRUE(v.items().empty());
  }
  {
    // an entry's nested group after the next entry began, or after the message moved on
    alltypes::EverythingBuilder b(buf.data(), buf.size());
    auto items = b.items();
    auto first = items.next();
    first.id(1);
    auto second = items.next();
    EXPECT_THROW(first.sub(), encode_error);
    EXPECT_THROW(first.label("x"), encode_error);
    first.note(5);  // fixed fields stay writable: the entry's block is where it was
    second.label("two");
    b.text("t");
    EXPECT_THROW(items.next(), encode_error);
    EXPECT_THROW(second.sub(), encode_error);
    const std::size_t n = b.finish();
    const alltypes::EverythingView v(buf.data(), n);
    EXPECT_EQ(to_json(v).substr(to_json(v).find("\"items\"")),
              R"("items":[{"id":1,"label":"","sub":[],"note":5},{"id":0,"label":"two",)"
              R"("sub":[],"note":null}],"text":"t","data":"","empty":[]})");
  }
  {
    // the nested group of the last entry is completed when the message moves on
    alltypes::EverythingBuilder b(buf.data(), buf.size());
    auto items = b.items();
    auto sub = items.next().sub();
    sub.next().v(1);
    sub.next().v(2).blob(std::string_view("b"));
    b.text("t");
    EXPECT_THROW(sub.next(), encode_error);
    const std::size_t n = b.finish();
    const alltypes::EverythingView v(buf.data(), n);
    EXPECT_EQ(v.items().begin()->sub().size(), 2u);
    EXPECT_EQ(alltypes::encode(v), std::vector<std::uint8_t>(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n)));
  }
}

TEST(AllTypes, OptionalsAreClearedAgain) {
  std::vector<std::uint8_t> buf(512);
  alltypes::EverythingBuilder b(buf.data(), buf.size());
  b.o_u64(9).o_char("x");
  b.o_outer().tag("T");
  b.o_u64(std::nullopt).o_char(std::nullopt).o_outer(std::nullopt);
  const std::size_t n = b.finish();
  std::vector<std::uint8_t> plain(512);
  alltypes::EverythingBuilder p(plain.data(), plain.size());
  ASSERT_EQ(p.finish(), n);
  EXPECT_EQ(std::memcmp(buf.data(), plain.data(), n), 0);
}

TEST(AllTypes, CorruptValuesAreRefusedWhenRead) {
  const auto good = unhex(EVERYTHING_HEX);
  auto error = [&](std::size_t at, std::uint8_t value) -> std::string {
    auto bytes = good;
    bytes[at] = value;
    try {
      const alltypes::EverythingView v(bytes.data(), bytes.size());
      (void)to_json(v);
    } catch (const decode_error& e) {
      return e.what();
    }
    return "";
  };
  // block offsets (+8 for the header): b 0, name 43, color 53, outer 59 (inner 0, tag 5, raw 8,
  // ok 10), o_color 79, o_outer 82
  EXPECT_EQ(error(8 + 0, 2), "cannot decode Everything.b at offset 8: bool byte is 2, not 0 or 1");
  EXPECT_EQ(error(8 + 43, 0x80),
            "cannot decode Everything.name at offset 51: char field holds a non-ASCII byte");
  EXPECT_EQ(error(8 + 54, 2),  // Blue (300, 0x012c) becomes 0x022c
            "cannot decode Everything.color at offset 61: 556 is not a value of Color");
  EXPECT_EQ(error(8 + 59 + 10, 3),
            "cannot decode Everything.outer.Outer.ok at offset 77: bool byte is 3, not 0 or 1");
  EXPECT_EQ(error(8 + 59 + 5, 0xff),
            "cannot decode Everything.outer.Outer.tag at offset 72: char field holds a "
            "non-ASCII byte");
  EXPECT_EQ(error(8 + 79, 7),
            "cannot decode Everything.o_color at offset 87: presence byte is 7, not 0 or 1");
  EXPECT_EQ(error(8 + 80, 9),  // Red (-1, 0xffff) becomes 0xff09
            "cannot decode Everything.o_color at offset 88: -247 is not a value of Color");
  EXPECT_EQ(error(8 + 82 + 1 + 10, 2),
            "cannot decode Everything.o_outer.Outer.ok at offset 101: bool byte is 2, not 0 or 1");
}

}  // namespace
