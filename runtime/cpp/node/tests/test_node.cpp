// seqbus::Node without a bus: errors carry the library's code and message, options are
// checked, a node that is not open says so, a message view reads the event in place, and a
// node with no sequencer to answer gives up after its ready timeout naming the sequencer.
#include <seqbus/node.hpp>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

/// A fresh directory, removed when the test ends.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/seqbus-node-test-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (d == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = d;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  operator const std::string&() const { return path_; }

 private:
  std::string path_;
};

/// A UDP port nothing holds now.
unsigned free_port() {
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
  close(s);
  return ntohs(a.sin_port);
}

std::string write_file(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = dir + "/" + name;
  std::ofstream(path) << text;
  return path;
}

/// A unicast bus configuration whose sequencer is not running; the node listens on `listen`.
std::string lonely_bus(const std::string& dir, std::string& listen) {
  listen = "127.0.0.1:" + std::to_string(free_port());
  return write_file(dir, "bus.toml",
                    "[bus]\nsession = \"LONELY\"\n[sequencer]\nupstream = \"127.0.0.1:" +
                        std::to_string(free_port()) + "\"\n[downstream]\ntransport = \"udp-unicast\"\n" +
                        "subscribers = [\"" + listen + "\"]\n");
}

class Quiet : public seqbus::Node {};

TEST(Node, AMissingConfigurationIsAConfigErrorNamingTheFile) {
  Quiet n;
  try {
    n.open({"/nonexistent/bus.toml", "A"});
    FAIL() << "opened";
  } catch (const seqbus::error& e) {
    EXPECT_EQ(e.code(), SEQBUS_ERR_CONFIG);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/bus.toml"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("SEQBUS_ERR_CONFIG"), std::string::npos) << e.what();
  }
  EXPECT_THROW(n.handle(), std::logic_error);
}

TEST(Node, ABadKeyIsNamed) {
  TempDir dir;
  auto path = write_file(dir, "bad.toml", "[bus]\nsession = \"X\"\n[sequencer]\nupstrem = \"x\"\n");
  Quiet n;
  try {
    n.open({path, "A"});
    FAIL() << "opened";
  } catch (const seqbus::error& e) {
    EXPECT_EQ(e.code(), SEQBUS_ERR_CONFIG);
    EXPECT_NE(std::string(e.what()).find("upstrem"), std::string::npos) << e.what();
  }
}

TEST(Node, ABadAccountIsAnArgumentError) {
  TempDir dir;
  std::string listen;
  auto path = lonely_bus(dir, listen);
  Quiet n;
  seqbus::Options o{path, "TOOLONGNAME"};
  o.listen = listen;
  try {
    n.open(o);
    FAIL() << "opened";
  } catch (const seqbus::error& e) {
    EXPECT_EQ(e.code(), SEQBUS_ERR_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("TOOLONGNAME"), std::string::npos) << e.what();
  }
}

TEST(Node, WithoutASequencerTheNodeGivesUpAfterItsReadyTimeout) {
  TempDir dir;
  std::string listen;
  auto path = lonely_bus(dir, listen);
  Quiet n;
  seqbus::Options o{path, "A", 1, seqbus::Start::live()};
  o.listen = listen;
  o.ready_timeout = std::chrono::milliseconds(300);
  try {
    n.open(o);
    FAIL() << "opened";
  } catch (const seqbus::error& e) {
    EXPECT_EQ(e.code(), SEQBUS_ERR_TIMEOUT);
    EXPECT_NE(std::string(e.what()).find("sequencer"), std::string::npos) << e.what();
  }
  EXPECT_THROW(n.handle(), std::logic_error);  // closed again
}

TEST(Node, OnErrorMustBeStopOrSkip) {
  TempDir dir;
  std::string listen;
  auto path = lonely_bus(dir, listen);
  Quiet n;
  seqbus::Options o{path, "A"};
  o.listen = listen;
  o.on_error = "ignore";
  EXPECT_THROW(n.open(o), std::invalid_argument);
  EXPECT_THROW(n.handle(), std::logic_error);
}

TEST(Node, StartPositions) {
  EXPECT_EQ(seqbus::Start::live().value(), 0u);
  EXPECT_EQ(seqbus::Start::rewind().value(), 1u);
  EXPECT_EQ(seqbus::Start::from(42).value(), 42u);
  EXPECT_THROW(seqbus::Start::from(0), std::invalid_argument);
}

TEST(Node, ANodeThatIsNotOpenSaysSo) {
  Quiet n;
  EXPECT_EQ(n.sequence(), 0u);
  EXPECT_THROW(n.send("x", 1), std::logic_error);
  EXPECT_THROW(n.set_timer(1, [] {}), std::logic_error);
  EXPECT_THROW(n.poll_once(std::chrono::milliseconds(1)), std::logic_error);
  n.close();  // nothing to close
  n.stop();
  EXPECT_TRUE(n.stopped());
}

TEST(Message, ReadsTheEventInPlace) {
  std::uint8_t body[12] = {4, 0, 7, 0, 9, 0, 2, 0, 1, 2, 3, 4};
  SeqbusEvent e{};
  e.kind = SEQBUS_EVENT_MESSAGE;
  e.flags = SEQBUS_FLAG_MINE;
  e.sequence = 17;
  e.time_ns = 123;
  e.body = body;
  e.body_len = sizeof body;
  e.block_length = 4;
  e.template_id = 7;
  e.schema_id = 9;
  e.version = 2;
  std::memcpy(e.sender, "GW\0\0\0\0\0\0", 8);
  e.sender_instance = 3;
  e.command_seq = 5;
  seqbus::Message m(e);
  EXPECT_EQ(m.sequence(), 17u);
  EXPECT_EQ(m.time_ns(), 123u);
  EXPECT_TRUE(m.mine());
  EXPECT_EQ(m.data(), body);
  EXPECT_EQ(m.size(), sizeof body);
  EXPECT_EQ(m.span().first, body);
  EXPECT_EQ(m.sender(), "GW");
  EXPECT_EQ(m.sender_instance(), 3u);
  EXPECT_EQ(m.command_seq(), 5u);
  EXPECT_EQ(m.template_id(), 7u);
  EXPECT_EQ(m.schema_id(), 9u);
  EXPECT_EQ(m.version(), 2u);
  std::memcpy(e.sender, "ABCDEFGH", 8);  // eight characters: no padding at all
  EXPECT_EQ(m.sender(), "ABCDEFGH");
  e.flags = 0;
  EXPECT_FALSE(m.mine());
}

}  // namespace
