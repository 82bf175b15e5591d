#include "net/listener.h"

#include <fmt/format.h>

#include "engine/core/error.h"

namespace shardlab::net {

boost::asio::ip::tcp::endpoint listen_on(boost::asio::ip::tcp::acceptor& acceptor,
                                         const std::string& address, uint16_t port,
                                         const std::string& who) {
  namespace asio = boost::asio;
  using tcp = asio::ip::tcp;
  const std::string where = fmt::format("{}:{}", address, port);
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(address, ec);
  if (ec) SL_THROW(IoError, "{}: cannot listen on {}: bad address ({})", who, where, ec.message());
  const tcp::endpoint endpoint(ip, port);
  auto fail = [&](const char* what) {
    SL_THROW(IoError, "{}: cannot listen on {}: {} failed: {}", who, where, what, ec.message());
  };
  acceptor.open(endpoint.protocol(), ec);
  if (ec) fail("open");
  acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (ec) fail("setsockopt");
  acceptor.bind(endpoint, ec);
  if (ec) fail("bind");
  acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail("listen");
  const tcp::endpoint bound = acceptor.local_endpoint(ec);
  if (ec) fail("getsockname");
  return bound;
}

}  // namespace shardlab::net
