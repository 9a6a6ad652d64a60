// The forwarder between a front HttpServer (TCP, as clients see it) and a node HttpServer
// serving the connections handed over its channel: what a client sends and gets back through
// the pair, including streams, headers, errors and a node that is gone. No root needed.
#include "front/forwarder.h"

#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "http/http_server.h"

namespace space::front {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct Reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
};

class ForwarderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    front_end_ = UniqueFd(sv[0]);
    api::HttpServerConfig nc;
    nc.idle_timeout_ms = 300;  // short, so that a kept node connection can be seen going stale
    node_ = std::make_unique<api::HttpServer>(nc, [this](api::Request& req, api::Responder& res) {
      NodeHandle(req, res);
    });
    node_->ServeChannel(UniqueFd(sv[1]));
    forwarder_ = std::make_unique<Forwarder>(front_end_.get());
    api::HttpServerConfig fc;
    fc.port = 0;
    fc.max_body_bytes = 1 << 20;
    front_ = std::make_unique<api::HttpServer>(fc, [this](api::Request& req, api::Responder& res) {
      forwarder_->Handle(req, res);
    });
    auto port = front_->Start();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    port_ = *port;
  }
  void TearDown() override {
    front_->Stop();
    node_->Stop();
  }

  // What the node's API would do, for the cases below.
  void NodeHandle(api::Request& req, api::Responder& res) {
    seen_method_ = req.method;
    seen_target_ = req.target;
    seen_body_ = req.body;
    seen_headers_ = req.headers;
    if (req.path == "/json") {
      res.AddHeader("Retry-After", "7");
      return res.SendJson(429, {{"code", "rate_limited"}});
    }
    if (req.path == "/stream") {
      if (!res.StartStream(200, "text/event-stream").ok()) return;
      for (int i = 0; i < 3; ++i) {
        if (!res.Write("data: " + std::to_string(i) + "\n\n").ok()) return;
      }
      return;
    }
    if (req.path == "/empty") return res.Send(204, "text/plain", "");
    if (req.path == "/big") return res.Send(200, "application/octet-stream", std::string(12 << 20, 'b'));
    res.Send(200, "application/octet-stream", req.body);
  }

  Reply Call(const std::string& method, const std::string& target, const std::string& body = "",
             std::map<std::string, std::string> headers = {}) {
    asio::io_context io;
    asio::ip::tcp::socket s(io);
    s.connect({asio::ip::make_address("127.0.0.1"), port_});
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, "localhost");
    for (auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    http::write(s, req);
    beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(boost::none);
    beast::error_code ec;
    http::read(s, buf, parser, ec);
    auto& res = parser.get();
    Reply r;
    r.status = static_cast<int>(res.result_int());
    r.body = res.body();
    for (auto& f : res) r.headers[std::string(f.name_string())] = std::string(f.value());
    return r;
  }

  UniqueFd front_end_;
  std::unique_ptr<api::HttpServer> node_, front_;
  std::unique_ptr<Forwarder> forwarder_;
  uint16_t port_ = 0;
  std::string seen_method_, seen_target_, seen_body_;
  std::map<std::string, std::string> seen_headers_;
};

TEST_F(ForwarderTest, RelaysRequestAndWholeResponse) {
  std::string body(300000, 'x');
  Reply r = Call("PUT", "/files?path=%2Froot%2Fa", body, {{"X-Api-Key", "k1"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, body);
  EXPECT_EQ(seen_method_, "PUT");
  EXPECT_EQ(seen_target_, "/files?path=%2Froot%2Fa");
  EXPECT_EQ(seen_headers_["x-api-key"], "k1");
  EXPECT_EQ(seen_headers_.count("connection"), 0u);  // the front's framing, not the client's
  EXPECT_EQ(r.headers["Content-Type"], "application/octet-stream");
}

TEST_F(ForwarderTest, KeepsNodeConnectionsForTheNextRequest) {
  Call("GET", "/json");
  Call("GET", "/json");  // another client connection, the same node connection
  EXPECT_EQ(node_->connections_served(), 1u);
}

TEST_F(ForwarderTest, ResendsOnANewConnectionWhenTheKeptOneWentStale) {
  Call("GET", "/json");
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the node closed it (idle)
  Reply r = Call("POST", "/echo", "again");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "again");
  EXPECT_EQ(node_->connections_served(), 2u);
}

TEST_F(ForwarderTest, KeepsStatusAndExtraHeaders) {
  Reply r = Call("GET", "/json");
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers["Retry-After"], "7");
  EXPECT_EQ(r.body, R"({"code":"rate_limited"})");
}

TEST_F(ForwarderTest, DropsHopByHopHeaders) {
  Call("POST", "/echo", "abc", {{"Proxy-Authorization", "secret"}, {"TE", "trailers"}, {"Upgrade", "h2c"}});
  EXPECT_EQ(seen_headers_.count("proxy-authorization"), 0u);
  EXPECT_EQ(seen_headers_.count("te"), 0u);
  // An upgrade keeps its Upgrade header (the node's ingress hands it to a preview port's
  // server; the API itself ignores it).
  EXPECT_EQ(seen_headers_["upgrade"], "h2c");
  EXPECT_EQ(seen_body_, "abc");
}

TEST_F(ForwarderTest, RelaysAStreamUntilTheNodeEndsIt) {
  Reply r = Call("GET", "/stream");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
  EXPECT_EQ(r.headers["Content-Type"], "text/event-stream");
}

// Larger than Beast's default 8 MB response limit (a file download).
TEST_F(ForwarderTest, RelaysALargeResponse) {
  Reply r = Call("GET", "/big");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), size_t{12} << 20);
}

TEST_F(ForwarderTest, RelaysAnEmptyResponse) {
  Reply r = Call("DELETE", "/empty");
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(r.body, "");
}

TEST_F(ForwarderTest, OversizedBodyEndsAtTheFront) {
  Reply r = Call("PUT", "/echo", std::string((1 << 20) + 1, 'x'));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(seen_method_, "");  // the node never saw it
}

TEST_F(ForwarderTest, NodeGoneIsAClearError) {
  node_->Stop();  // closes the node's end of the channel
  Reply r = Call("GET", "/json");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("\"code\":\"unavailable\""), std::string::npos) << r.body;
}

}  // namespace
}  // namespace space::front
