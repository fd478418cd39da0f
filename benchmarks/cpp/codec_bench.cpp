// Encode and decode of the SPEC's NewOrder (2 legs, 3 fills, stop_price absent, expire_at set,
// an account and a memo: the Java benchmark's message) and of a BookUpdate of 10 levels, with
// the seqc-generated C++ codecs (generated/cpp/exchange.hpp) and SBE's C++ codecs (generated
// by sbe-all from exchange-sbe.xml, the same messages in SBE's terms), in one binary with the
// same compiler flags. SBE runs with its bounds checks on (its default), as ours always are.
//
// Encode writes every field into a buffer and returns the length; decode wraps the bytes
// (seqbus: checking the header and walking the structure; SBE: reading the header and checking
// its schema and template ids) and reads
// every field, iterating the groups, text and bytes as string views (no copy, no allocation on
// either side); its sum goes to benchmark::DoNotOptimize.
#include "exchange.hpp"
#include "sbe_exchange/BookUpdate.h"
#include "sbe_exchange/MessageHeader.h"
#include "sbe_exchange/NewOrder.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

constexpr std::string_view ACCOUNT = "trader-0001";
constexpr std::string_view MEMO = "client-tag-77";
constexpr int LEVELS = 10;
namespace sx = sbe::exchange;

// ---- NewOrder ---------------------------------------------------------------------------------

// What an application encodes from: the values are read from memory at each encode (the
// benchmark hides them from the optimizer), not folded into the code as constants.
struct fill_in {
  std::uint32_t qty;
  std::int64_t price;
};
struct leg_in {
  std::string_view symbol;
  std::uint16_t ratio;
  bool buy;
  int fills;
  fill_in fill[2];
};
struct order_in {
  std::uint64_t order_id = 1234567890;
  std::uint32_t client_id = 42;
  std::string_view symbol = "AAPL";
  bool buy = true;
  std::int64_t mantissa = 18950;
  std::int8_t exponent = -2;
  std::uint32_t quantity = 100;
  std::uint64_t expire_at = 1700000000000000000ull;
  leg_in legs[2] = {{"MSFT", 1, false, 2, {{10, 41500}, {5, 41510}}},
                    {"GOOG", 2, true, 1, {{7, 17320}, {0, 0}}}};
  std::string_view account = ACCOUNT;
  std::string_view memo = MEMO;
};
order_in order_input;

std::size_t encode_order(std::uint8_t* buf, std::size_t cap, const order_in& o) {
  exchange::NewOrderBuilder e(buf, cap);
  e.order_id(o.order_id)
      .client_id(o.client_id)
      .symbol(o.symbol)
      .side(o.buy ? exchange::Side::Buy : exchange::Side::Sell)
      .quantity(o.quantity)
      .inst(exchange::ExecInst::PostOnly)
      .expire_at(o.expire_at);
  e.price().mantissa(o.mantissa).exponent(o.exponent);
  auto legs = e.legs();
  for (const leg_in& in : o.legs) {
    auto leg = legs.next();
    leg.symbol(in.symbol).ratio(in.ratio).side(in.buy ? exchange::Side::Buy : exchange::Side::Sell);
    auto fills = leg.fills();
    for (int i = 0; i < in.fills; ++i) fills.next().qty(in.fill[i].qty).price(in.fill[i].price);
  }
  e.account(o.account).memo(o.memo);
  return e.finish();
}

std::size_t encode_order_sbe(char* buf, std::size_t cap, const order_in& o) {
  sx::NewOrder e;
  e.wrapAndApplyHeader(buf, 0, cap)
      .orderId(o.order_id)
      .clientId(o.client_id)
      .putSymbol(o.symbol)
      .side(o.buy ? sx::Side::Buy : sx::Side::Sell)
      .quantity(o.quantity)
      .stopPrice(sx::NewOrder::stopPriceNullValue())
      .expireAt(o.expire_at);
  e.price().mantissa(o.mantissa).exponent(o.exponent);
  e.inst().clear().postOnly(true);
  auto& legs = e.legsCount(2);
  for (const leg_in& in : o.legs) {
    legs.next().putSymbol(in.symbol).ratio(in.ratio).side(in.buy ? sx::Side::Buy : sx::Side::Sell);
    auto& fills = legs.fillsCount(static_cast<std::uint16_t>(in.fills));
    for (int i = 0; i < in.fills; ++i) fills.next().qty(in.fill[i].qty).price(in.fill[i].price);
  }
  e.putAccount(o.account).putMemo(o.memo);
  return sx::MessageHeader::encodedLength() + e.encodedLength();
}

std::int64_t decode_order(const std::uint8_t* buf, std::size_t len) {
  const exchange::NewOrderView d(buf, len);
  const auto price = d.price();
  const auto stop = d.stop_price();
  const auto expire = d.expire_at();
  std::int64_t s = static_cast<std::int64_t>(d.order_id() + d.client_id()) +
                   static_cast<std::int64_t>(d.symbol().size()) + static_cast<int>(d.side()) +
                   price.mantissa() + price.exponent() + d.quantity() + (stop ? *stop : 0) +
                   d.inst().bits + static_cast<std::int64_t>(expire ? *expire : 0);
  for (const auto& leg : d.legs()) {
    s += static_cast<std::int64_t>(leg.symbol().size()) + leg.ratio() +
         static_cast<int>(leg.side());
    for (const auto& fill : leg.fills()) s += fill.qty() + fill.price();
  }
  return s + static_cast<std::int64_t>(d.account().size() + d.memo().size());
}

std::int64_t decode_order_sbe(char* buf, std::size_t len) {
  const sx::MessageHeader h(buf, 0, len, sx::MessageHeader::sbeSchemaVersion());
  // what a consumer checks before it reads (the seqbus view checks it when wrapping)
  if (h.schemaId() != sx::NewOrder::sbeSchemaId() || h.templateId() != sx::NewOrder::sbeTemplateId()) {
    return -1;
  }
  sx::NewOrder d;
  d.wrapForDecode(buf, sx::MessageHeader::encodedLength(), h.blockLength(), h.version(), len);
  auto price = d.price();
  const std::int64_t stop = d.stopPrice();
  const std::uint64_t expire = d.expireAt();
  std::int64_t s = static_cast<std::int64_t>(d.orderId() + d.clientId()) +
                   static_cast<std::int64_t>(d.getSymbolAsStringView().size()) +
                   static_cast<int>(d.side()) + price.mantissa() + price.exponent() +
                   d.quantity() + (stop != sx::NewOrder::stopPriceNullValue() ? stop : 0) +
                   d.inst().rawValue() +
                   static_cast<std::int64_t>(
                       expire != sx::NewOrder::expireAtNullValue() ? expire : 0);
  auto& legs = d.legs();
  while (legs.hasNext()) {
    legs.next();
    s += static_cast<std::int64_t>(legs.getSymbolAsStringView().size()) + legs.ratio() +
         static_cast<int>(legs.side());
    auto& fills = legs.fills();
    while (fills.hasNext()) {
      fills.next();
      s += fills.qty() + fills.price();
    }
  }
  s += static_cast<std::int64_t>(d.getAccountAsStringView().size());
  return s + static_cast<std::int64_t>(d.getMemoAsStringView().size());
}

// ---- BookUpdate -------------------------------------------------------------------------------

struct level_in {
  bool bid;
  std::int64_t mantissa;
  std::int8_t exponent;
  std::uint64_t quantity;
  std::uint32_t orders;
};
struct book_in {
  std::string_view symbol = "AAPL";
  std::uint64_t at = 8;
  level_in levels[LEVELS];
  book_in() {
    for (int i = 0; i < LEVELS; ++i) {
      levels[i] = {i % 2 == 0, 18950 + i, -2, static_cast<std::uint64_t>(100 + i),
                   static_cast<std::uint32_t>(i)};
    }
  }
};
book_in book_input;

std::size_t encode_book(std::uint8_t* buf, std::size_t cap, const book_in& b) {
  exchange::BookUpdateBuilder e(buf, cap);
  e.symbol(b.symbol).at(b.at);
  auto levels = e.levels();
  for (const level_in& in : b.levels) {
    auto l = levels.next();
    l.side(in.bid ? exchange::BookSide::Bid : exchange::BookSide::Ask)
        .quantity(in.quantity)
        .orders(in.orders);
    l.price().mantissa(in.mantissa).exponent(in.exponent);
  }
  return e.finish();
}

std::size_t encode_book_sbe(char* buf, std::size_t cap, const book_in& b) {
  sx::BookUpdate e;
  e.wrapAndApplyHeader(buf, 0, cap).putSymbol(b.symbol).at(b.at);
  auto& levels = e.levelsCount(LEVELS);
  for (const level_in& in : b.levels) {
    levels.next()
        .side(in.bid ? sx::BookSide::Bid : sx::BookSide::Ask)
        .quantity(in.quantity)
        .orders(in.orders)
        .price()
        .mantissa(in.mantissa)
        .exponent(in.exponent);
  }
  return sx::MessageHeader::encodedLength() + e.encodedLength();
}

std::int64_t decode_book(const std::uint8_t* buf, std::size_t len) {
  const exchange::BookUpdateView d(buf, len);
  std::int64_t s = static_cast<std::int64_t>(d.symbol().size() + d.at());
  for (const auto& l : d.levels()) {
    const auto price = l.price();
    s += static_cast<int>(l.side()) + price.mantissa() + price.exponent() +
         static_cast<std::int64_t>(l.quantity()) + l.orders();
  }
  return s;
}

std::int64_t decode_book_sbe(char* buf, std::size_t len) {
  const sx::MessageHeader h(buf, 0, len, sx::MessageHeader::sbeSchemaVersion());
  if (h.schemaId() != sx::BookUpdate::sbeSchemaId() ||
      h.templateId() != sx::BookUpdate::sbeTemplateId()) {
    return -1;
  }
  sx::BookUpdate d;
  d.wrapForDecode(buf, sx::MessageHeader::encodedLength(), h.blockLength(), h.version(), len);
  std::int64_t s = static_cast<std::int64_t>(d.getSymbolAsStringView().size() + d.at());
  auto& levels = d.levels();
  while (levels.hasNext()) {
    levels.next();
    auto price = levels.price();
    s += static_cast<int>(levels.side()) + price.mantissa() + price.exponent() +
         static_cast<std::int64_t>(levels.quantity()) + levels.orders();
  }
  return s;
}

// ---- the benchmarks ---------------------------------------------------------------------------

alignas(64) std::uint8_t out_buf[1024];
alignas(64) std::uint8_t order_buf[1024];
alignas(64) std::uint8_t book_buf[1024];
std::size_t order_len = 0;
std::size_t book_len = 0;
alignas(64) char sbe_out[1024];
alignas(64) char sbe_order[1024];
alignas(64) char sbe_book[1024];
std::size_t sbe_order_len = 0;
std::size_t sbe_book_len = 0;

void EncodeNewOrder_seqbus(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(order_input);
    benchmark::DoNotOptimize(encode_order(out_buf, sizeof out_buf, order_input));
  }
  benchmark::ClobberMemory();
}
void EncodeNewOrder_SBE(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(order_input);
    benchmark::DoNotOptimize(encode_order_sbe(sbe_out, sizeof sbe_out, order_input));
  }
  benchmark::ClobberMemory();
}
void DecodeNewOrder_seqbus(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(order_buf);
    benchmark::DoNotOptimize(decode_order(order_buf, order_len));
  }
}
void DecodeNewOrder_SBE(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(sbe_order);
    benchmark::DoNotOptimize(decode_order_sbe(sbe_order, sbe_order_len));
  }
}
void EncodeBookUpdate_seqbus(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(book_input);
    benchmark::DoNotOptimize(encode_book(out_buf, sizeof out_buf, book_input));
  }
  benchmark::ClobberMemory();
}
void EncodeBookUpdate_SBE(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(book_input);
    benchmark::DoNotOptimize(encode_book_sbe(sbe_out, sizeof sbe_out, book_input));
  }
  benchmark::ClobberMemory();
}
void DecodeBookUpdate_seqbus(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(book_buf);
    benchmark::DoNotOptimize(decode_book(book_buf, book_len));
  }
}
void DecodeBookUpdate_SBE(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(sbe_book);
    benchmark::DoNotOptimize(decode_book_sbe(sbe_book, sbe_book_len));
  }
}

BENCHMARK(EncodeNewOrder_seqbus);
BENCHMARK(EncodeNewOrder_SBE);
BENCHMARK(DecodeNewOrder_seqbus);
BENCHMARK(DecodeNewOrder_SBE);
BENCHMARK(EncodeBookUpdate_seqbus);
BENCHMARK(EncodeBookUpdate_SBE);
BENCHMARK(DecodeBookUpdate_seqbus);
BENCHMARK(DecodeBookUpdate_SBE);

}  // namespace

/// `codec_bench --loop OP N`: OP (0-7, the benchmarks in the order above) run N times with no
/// timing, for counting instructions under valgrind (instructions.sh), which the machine's load
/// does not change.
int loop(int op, long n) {
  std::int64_t s = 0;
  for (long i = 0; i < n; ++i) {
    benchmark::DoNotOptimize(order_input);
    benchmark::DoNotOptimize(book_input);
    switch (op) {
      case 0: s += static_cast<std::int64_t>(encode_order(out_buf, sizeof out_buf, order_input)); break;
      case 1: s += static_cast<std::int64_t>(encode_order_sbe(sbe_out, sizeof sbe_out, order_input)); break;
      case 2: s += decode_order(order_buf, order_len); break;
      case 3: s += decode_order_sbe(sbe_order, sbe_order_len); break;
      case 4: s += static_cast<std::int64_t>(encode_book(out_buf, sizeof out_buf, book_input)); break;
      case 5: s += static_cast<std::int64_t>(encode_book_sbe(sbe_out, sizeof sbe_out, book_input)); break;
      case 6: s += decode_book(book_buf, book_len); break;
      default: s += decode_book_sbe(sbe_book, sbe_book_len); break;
    }
    benchmark::ClobberMemory();
  }
  std::printf("%lld\n", static_cast<long long>(s));
  return 0;
}

int main(int argc, char** argv) {
  order_len = encode_order(order_buf, sizeof order_buf, order_input);
  book_len = encode_book(book_buf, sizeof book_buf, book_input);
  sbe_order_len = encode_order_sbe(sbe_order, sizeof sbe_order, order_input);
  sbe_book_len = encode_book_sbe(sbe_book, sizeof sbe_book, book_input);
  // both sides read the same values, and ours wrote what the Python codecs write
  if (decode_order(order_buf, order_len) != decode_order_sbe(sbe_order, sbe_order_len) ||
      decode_book(book_buf, book_len) != decode_book_sbe(sbe_book, sbe_book_len)) {
    std::fprintf(stderr, "codec_bench: the two codecs read different values\n");
    return 1;
  }
  if (argc == 4 && std::string_view(argv[1]) == "--loop") {
    return loop(std::atoi(argv[2]), std::atol(argv[3]));
  }
  std::fprintf(stderr,
               "codec_bench: NewOrder %zu bytes (SBE %zu), BookUpdate of %d levels %zu bytes "
               "(SBE %zu)\n",
               order_len, sbe_order_len, LEVELS, book_len, sbe_book_len);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
