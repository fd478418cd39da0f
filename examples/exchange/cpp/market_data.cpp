// The exchange demo's market-data node in C++: the same deterministic state machine as the
// Python DemoMarketData (examples/exchange/market_data.py and demo_nodes.py), so it can run as
// a hot-hot instance of the Python node's account:
//   * price levels rebuilt from the engine's output, a BookUpdate per symbol for the levels
//     that changed every 50 ms of stream time (a deterministic timer), the whole book at the
//     end-of-run marker (a CancelOrder of order 0);
//   * per exchange message type, a count and a BLAKE2b-16 digest of (sequence, sequencer
//     time, key field) in stream order;
//   * once every BookUpdate it published is back in the stream after the marker, the report
//     EXCHANGE_REPORT_DIR/<account>-<instance>.json (updates, last_sequence, seen, and the
//     book's state hash as MarketDataPublisher.state_hash() computes it), and it stops.
//
//   exchange-market-data -c bus.toml --account MD --instance 2 --rewind [--listen ADDR]
#include <exchange_node.hpp>  // exchange::ExchangeNode (and the codecs, exchange.hpp)

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "blake2b.hpp"

namespace {

constexpr std::uint64_t PUBLISH_NS = 50'000'000;
constexpr std::int8_t PRICE_EXPONENT = -2;
constexpr std::uint64_t END_MARKER = 0;
const char* const SYMBOLS[] = {"AAPL", "MSFT", "GOOG", "AMZN"};

/// (symbol, side, price): a price level, ordered as Python sorts its tuples.
using Level = std::tuple<std::string, std::uint8_t, std::int64_t>;

struct Entry {
  std::string symbol;
  std::uint8_t side;
  std::int64_t price;
  std::int64_t remaining;
};

/// A message type's count and digest.
struct Seen {
  std::uint64_t count = 0;
  example::Blake2b digest{16};
};

class MarketData : public exchange::ExchangeNode {
 public:
  /// Every exchange message (the Python node's handlers): the same records, so the same
  /// timers, in every instance.
  std::optional<std::vector<seqbus::Topic>> topics() const override { return topics_of_schema(); }

  void on_opened() override { set_timer_after(PUBLISH_NS, [this] { publish(); }); }

  // -- MarketDataPublisher --------------------------------------------------------------

  void on_new_order(const exchange::NewOrderView& v, const seqbus::Message&) override {
    std::uint8_t side = static_cast<std::uint8_t>(v.side() == exchange::Side::Buy ? exchange::BookSide::Bid
                                                                                 : exchange::BookSide::Ask);
    pending_[v.order_id()] = Entry{std::string(v.symbol()), side, v.price().mantissa(), v.quantity()};
    saw("exchange.NewOrder", v.order_id());
  }

  void on_order_rejected(const exchange::OrderRejectedView& v, const seqbus::Message&) override {
    pending_.erase(v.order_id());
    saw("exchange.OrderRejected", v.order_id());
  }

  void on_order_accepted(const exchange::OrderAcceptedView& v, const seqbus::Message&) override {
    auto it = pending_.find(v.order_id());
    if (it != pending_.end()) {
      Entry e = it->second;
      pending_.erase(it);
      resting_[v.order_id()] = e;
      Level key{e.symbol, e.side, e.price};
      auto& level = levels_[key];
      level.first += e.remaining;
      level.second += 1;
      changed_.insert(key);
    }
    saw("exchange.OrderAccepted", v.order_id());
  }

  void on_trade(const exchange::TradeView& v, const seqbus::Message&) override {
    reduce(v.buy_order_id(), v.quantity());
    reduce(v.sell_order_id(), v.quantity());
    saw("exchange.Trade", v.trade_id());
  }

  void on_order_cancelled(const exchange::OrderCancelledView& v, const seqbus::Message&) override {
    reduce(v.order_id(), v.cancelled_quantity());
    saw("exchange.OrderCancelled", v.order_id());
  }

  void on_book_update(const exchange::BookUpdateView& v, const seqbus::Message& m) override {
    std::uint64_t total = 0;
    for (const auto& level : v.levels()) total += level.quantity();
    saw("exchange.BookUpdate", total);
    if (m.mine()) {
      ++own_updates_;
      maybe_finish();
    }
  }

  void on_cancel_order(const exchange::CancelOrderView& v, const seqbus::Message&) override {
    saw("exchange.CancelOrder", v.order_id());
    if (v.order_id() == END_MARKER) {
      // the final book, then the report once every update this node published is back
      ending_ = true;
      publish_book();
      maybe_finish();
    }
  }

 private:
  void reduce(std::uint64_t order_id, std::int64_t qty) {
    auto it = resting_.find(order_id);
    if (it == resting_.end()) return;
    Entry& e = it->second;
    Level key{e.symbol, e.side, e.price};
    auto& level = levels_[key];
    level.first -= qty;
    e.remaining -= qty;
    if (e.remaining <= 0) {
      resting_.erase(it);
      level.second -= 1;
    }
    changed_.insert(key);
  }

  /// Every PUBLISH_NS of stream time: a BookUpdate per symbol for the levels that changed.
  void publish() {
    std::uint64_t now = sequencer_time();
    std::map<std::string, std::vector<std::tuple<std::uint8_t, std::int64_t, std::int64_t, std::int64_t>>> by_symbol;
    for (const Level& key : changed_) {
      std::int64_t qty = 0, orders = 0;
      auto it = levels_.find(key);
      if (it != levels_.end()) std::tie(qty, orders) = it->second;
      if (orders <= 0 && it != levels_.end()) levels_.erase(it);
      by_symbol[std::get<0>(key)].emplace_back(std::get<1>(key), std::get<2>(key), std::max<std::int64_t>(qty, 0),
                                               std::max<std::int64_t>(orders, 0));
    }
    changed_.clear();
    for (const auto& [symbol, levels] : by_symbol) post_update(symbol, now, levels);
    set_timer(now + PUBLISH_NS, [this] { publish(); });
  }

  /// The whole book now, one BookUpdate per symbol (none for an empty book).
  void publish_book() {
    std::uint64_t now = sequencer_time();
    for (const char* symbol : SYMBOLS) {
      std::vector<std::tuple<std::uint8_t, std::int64_t, std::int64_t, std::int64_t>> levels;
      for (const auto& [key, value] : levels_) {
        if (std::get<0>(key) == symbol && value.second > 0) {
          levels.emplace_back(std::get<1>(key), std::get<2>(key), value.first, value.second);
        }
      }
      post_update(symbol, now, levels);
    }
  }

  void post_update(const std::string& symbol, std::uint64_t at,
                   const std::vector<std::tuple<std::uint8_t, std::int64_t, std::int64_t, std::int64_t>>& levels) {
    post_book_update([&](exchange::BookUpdateBuilder& b) {
      b.symbol(symbol).at(at);
      auto group = b.levels();
      for (const auto& [side, price, qty, orders] : levels) {
        auto e = group.next();
        e.side(static_cast<exchange::BookSide>(side));
        e.price().mantissa(price).exponent(PRICE_EXPONENT);
        e.quantity(static_cast<std::uint64_t>(qty));
        e.orders(static_cast<std::uint32_t>(orders));
      }
    });
    ++published_;
  }

  /// MarketDataPublisher.state_hash(): BLAKE2b-16 over the levels in order, each the symbol's
  /// bytes and "<BqqI" (side, price, quantity, orders).
  std::string state_hash() const {
    example::Blake2b h(16);
    for (const auto& [key, value] : levels_) {
      const auto& [symbol, side, price] = key;
      std::uint8_t rec[1 + 8 + 8 + 4];
      rec[0] = side;
      put(rec + 1, static_cast<std::uint64_t>(price), 8);
      put(rec + 9, static_cast<std::uint64_t>(value.first), 8);
      put(rec + 17, static_cast<std::uint64_t>(value.second), 4);
      h.update(symbol.data(), symbol.size());
      h.update(rec, sizeof rec);
    }
    return h.hexdigest();
  }

  // -- DemoMarketData ---------------------------------------------------------------------

  static void put(std::uint8_t* p, std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
  }

  /// One message of `name` seen: its count and the digest of (sequence, time, key).
  void saw(const char* name, std::uint64_t key) {
    auto [it, added] = seen_.try_emplace(name);
    if (added) order_.push_back(name);
    Seen& s = it->second;
    ++s.count;
    std::uint8_t rec[24];
    put(rec, sequence(), 8);
    put(rec + 8, sequencer_time(), 8);
    put(rec + 16, key, 8);
    s.digest.update(rec, sizeof rec);
  }

  void maybe_finish() {
    if (!ending_ || own_updates_ < published_) return;
    const char* dir = std::getenv("EXCHANGE_REPORT_DIR");
    if (dir == nullptr) throw std::runtime_error("EXCHANGE_REPORT_DIR is not set: where the report goes");
    std::string json = "{\"updates\": " + std::to_string(published_) +
                       ", \"last_sequence\": " + std::to_string(sequence()) + ", \"seen\": {";
    for (std::size_t i = 0; i < order_.size(); ++i) {
      Seen copy = seen_.at(order_[i]);  // the digest so far; the running one goes on
      json += (i ? ", \"" : "\"") + order_[i] + "\": {\"count\": " + std::to_string(copy.count) +
              ", \"digest\": \"" + copy.digest.hexdigest() + "\"}";
    }
    json += "}, \"state_hash\": \"" + state_hash() + "\", \"language\": \"c++\"}";
    std::string name = account() + "-" + std::to_string(instance()) + ".json";
    std::string tmp = std::string(dir) + "/." + name + ".tmp";
    std::ofstream(tmp) << json;
    if (std::rename(tmp.c_str(), (std::string(dir) + "/" + name).c_str()) != 0) {
      throw std::runtime_error("cannot write the report " + name + " in " + dir);
    }
    seqbus::log(seqbus::Level::info, "node " + account() + "/" + std::to_string(instance()) + ": report " + name +
                                         " written at #" + std::to_string(sequence()));
    stop();
  }

  std::unordered_map<std::uint64_t, Entry> pending_, resting_;
  std::map<Level, std::pair<std::int64_t, std::int64_t>> levels_;  // quantity, orders
  std::set<Level> changed_;
  std::uint64_t published_ = 0;
  std::uint64_t own_updates_ = 0;
  bool ending_ = false;
  std::unordered_map<std::string, Seen> seen_;
  std::vector<std::string> order_;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "exchange-market-data: " << why
            << "\nusage: exchange-market-data -c CONFIG --account NAME [--instance N] "
               "[--rewind | --from SEQ] [--listen HOST:PORT]\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  seqbus::log_to_stderr("exchange-market-data");
  seqbus::Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "-c" || a == "--config") {
      o.config = value();
    } else if (a == "--account") {
      o.account = value();
    } else if (a == "--instance") {
      o.instance = static_cast<std::uint16_t>(std::stoul(value()));
    } else if (a == "--rewind") {
      o.start = seqbus::Start::rewind();
    } else if (a == "--from") {
      o.start = seqbus::Start::from(std::stoull(value()));
    } else if (a == "--listen") {
      o.listen = value();
    } else {
      usage("unknown argument " + a);
    }
  }
  if (o.config.empty() || o.account.empty()) usage("-c CONFIG and --account NAME are needed");
  MarketData node;
  seqbus::stop_on_signals(node);
  try {
    node.run(o);
  } catch (const std::exception& e) {
    std::cerr << "exchange-market-data: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
