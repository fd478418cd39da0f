// The node base seqc generates (generated/cpp/exchange_node.hpp: exchange::ExchangeNode) without
// a bus: each message of its schema reaches the handler of its template and no other, with the
// view over the message's bytes and the seqbus::Message it came in; unknown templates and other
// schemas' messages reach on_message and no typed handler; a message that does not decode is its
// handler's error. test_node_bus.cpp sends typed through a real bus.
#include <exchange_node.hpp>
#include <bus.hpp>
#include <pingpong.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

/// Records each handler's call as "handler key" and each on_message as "on_message S/T".
class Recorder : public exchange::ExchangeNode {
 public:
  std::vector<std::string> calls;
  std::vector<const seqbus::Message*> records;

  /// What the node's loop does with a message.
  void hand(const seqbus::Message& m) { deliver(m); }

  void on_new_order(const exchange::NewOrderView& v, const seqbus::Message& m) override {
    saw("on_new_order", v.order_id(), m);
  }
  void on_order_accepted(const exchange::OrderAcceptedView& v, const seqbus::Message& m) override {
    saw("on_order_accepted", v.order_id(), m);
  }
  void on_order_rejected(const exchange::OrderRejectedView& v, const seqbus::Message& m) override {
    saw("on_order_rejected", v.order_id(), m);
  }
  void on_cancel_order(const exchange::CancelOrderView& v, const seqbus::Message& m) override {
    saw("on_cancel_order", v.order_id(), m);
  }
  void on_order_cancelled(const exchange::OrderCancelledView& v, const seqbus::Message& m) override {
    saw("on_order_cancelled", v.order_id(), m);
  }
  void on_trade(const exchange::TradeView& v, const seqbus::Message& m) override {
    saw("on_trade", v.trade_id(), m);
  }
  void on_book_update(const exchange::BookUpdateView& v, const seqbus::Message& m) override {
    std::uint64_t total = 0;
    for (const auto& level : v.levels()) total += level.quantity();
    saw("on_book_update", total, m);
  }
  void on_message(const seqbus::Message& m) override {
    calls.push_back("on_message " + std::to_string(m.schema_id()) + "/" + std::to_string(m.template_id()));
    records.push_back(&m);
  }

 private:
  void saw(const char* handler, std::uint64_t key, const seqbus::Message& m) {
    calls.push_back(std::string(handler) + " " + std::to_string(key));
    records.push_back(&m);
  }
};

using Bytes = std::vector<std::uint8_t>;

/// `b` finished into bytes.
template <class Builder>
Bytes done(std::vector<std::uint8_t>& buf, Builder& b) {
  return Bytes(buf.begin(), buf.begin() + static_cast<long>(b.finish()));
}

/// One message of each of the schema's seven templates, each with its own key.
std::vector<Bytes> one_of_each() {
  std::vector<std::uint8_t> buf(4096);
  std::vector<Bytes> out;
  {
    exchange::NewOrderBuilder b(buf.data(), buf.size());
    b.order_id(101).symbol("AAPL").side(exchange::Side::Buy).quantity(5);
    out.push_back(done(buf, b));
  }
  {
    exchange::OrderAcceptedBuilder b(buf.data(), buf.size());
    b.order_id(102);
    out.push_back(done(buf, b));
  }
  {
    exchange::OrderRejectedBuilder b(buf.data(), buf.size());
    b.order_id(103);
    out.push_back(done(buf, b));
  }
  {
    exchange::CancelOrderBuilder b(buf.data(), buf.size());
    b.order_id(104);
    out.push_back(done(buf, b));
  }
  {
    exchange::OrderCancelledBuilder b(buf.data(), buf.size());
    b.order_id(105);
    out.push_back(done(buf, b));
  }
  {
    exchange::TradeBuilder b(buf.data(), buf.size());
    b.trade_id(106);
    out.push_back(done(buf, b));
  }
  {
    exchange::BookUpdateBuilder b(buf.data(), buf.size());
    b.symbol("AAPL").at(1);
    auto levels = b.levels();
    levels.next().side(exchange::BookSide::Bid).quantity(100).orders(1);
    levels.next().side(exchange::BookSide::Ask).quantity(7).orders(2);
    out.push_back(done(buf, b));
  }
  return out;
}

/// A message event over `body` (its header read from the bytes, as the node library does).
SeqbusEvent event(const Bytes& body, std::uint64_t sequence) {
  SeqbusEvent e{};
  e.kind = SEQBUS_EVENT_MESSAGE;
  e.sequence = sequence;
  e.body = body.data();
  e.body_len = body.size();
  auto u16 = [&](std::size_t at) { return static_cast<std::uint16_t>(body[at] | body[at + 1] << 8); };
  e.block_length = u16(0);
  e.template_id = u16(2);
  e.schema_id = u16(4);
  e.version = u16(6);
  return e;
}

TEST(TypedNode, EachMessageReachesItsOwnHandlerOnly) {
  const std::vector<std::string> handlers = {"on_new_order 101",   "on_order_accepted 102", "on_order_rejected 103",
                                             "on_cancel_order 104", "on_order_cancelled 105", "on_trade 106",
                                             "on_book_update 107"};
  auto messages = one_of_each();
  ASSERT_EQ(messages.size(), handlers.size());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    Recorder node;
    SeqbusEvent e = event(messages[i], 1000 + i);
    seqbus::Message m(e);
    node.hand(m);
    EXPECT_EQ(node.calls, std::vector<std::string>{handlers[i]}) << "template " << i + 1;
    ASSERT_EQ(node.records.size(), 1u);
    EXPECT_EQ(node.records[0], &m) << "the handler is handed the message it came in";
  }
  // one node, all of them twice
  Recorder node;
  std::vector<std::string> twice;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      SeqbusEvent e = event(messages[i], i);
      node.hand(seqbus::Message(e));
      twice.push_back(handlers[i]);
    }
  }
  EXPECT_EQ(node.calls, twice);
}

TEST(TypedNode, UnknownTemplatesAndOtherSchemasGoToOnMessage) {
  Recorder node;
  std::vector<Bytes> bodies;
  Bytes unknown = one_of_each()[0];  // an exchange header with a template this code does not know
  unknown[2] = 99;
  bodies.push_back(unknown);
  std::vector<std::uint8_t> buf(256);
  {
    bus::ClockTickBuilder b(buf.data(), buf.size());  // the bus's own schema
    bodies.push_back(done(buf, b));
  }
  {
    pingpong::PingBuilder b(buf.data(), buf.size());  // another application schema
    bodies.push_back(done(buf, b));
  }
  Bytes foreign = one_of_each()[0];  // another schema, NewOrder's template id: not a NewOrder
  foreign[4] = 9;
  bodies.push_back(foreign);
  for (const Bytes& b : bodies) {
    SeqbusEvent e = event(b, 1);
    node.hand(seqbus::Message(e));
  }
  EXPECT_EQ(node.calls, (std::vector<std::string>{"on_message 7/99", "on_message " + std::to_string(bus::SCHEMA_ID) + "/1",
                                                  "on_message " + std::to_string(pingpong::SCHEMA_ID) + "/1",
                                                  "on_message 9/1"}));
  auto topics = exchange::ExchangeNode::topics_of_schema();
  ASSERT_EQ(topics.size(), 7u);
  EXPECT_EQ(topics[6].schema_id, exchange::SCHEMA_ID);
  EXPECT_EQ(topics[6].template_id, 7u);
}

TEST(TypedNode, AMessageThatDoesNotDecodeIsItsHandlersErrorNotAnotherHandlersCall) {
  Recorder node;
  Bytes cut = one_of_each()[6];  // a BookUpdate without the end of its last level
  cut.resize(cut.size() - 5);
  SeqbusEvent e = event(cut, 1);
  EXPECT_THROW(node.hand(seqbus::Message(e)), seqbus::codec::decode_error);
  EXPECT_TRUE(node.calls.empty());
}

TEST(TypedNode, ASendBufferTooSmallForAHeaderIsRefused) {
  EXPECT_THROW({ exchange::ExchangeNode tiny(4); }, std::invalid_argument);
  Recorder fine;
  EXPECT_THROW(fine.send_cancel_order([](exchange::CancelOrderBuilder& b) { b.order_id(1); }), std::logic_error)
      << "a node that is not open does not send";
}

}  // namespace
