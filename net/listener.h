// Opening a TCP listener the one way the collector and the web server both do it: the address
// parsed, SO_REUSEADDR (a restarted server gets its port back while old connections sit in
// TIME_WAIT), bind, listen. One error style: "WHO: cannot listen on ADDR:PORT: bind failed: ...".
#pragma once

#include <cstdint>
#include <string>
#include <utility>  // before Boost.Asio: its awaitable.hpp uses std::exchange (Boost 1.74, GCC 12)

#include <boost/asio/ip/tcp.hpp>

namespace shardlab::net {

// Opens `acceptor` on address:port (port 0: any free port) and returns the endpoint it is bound
// to. Throws IoError prefixed with `who` ("collector", "--http") when any step fails.
boost::asio::ip::tcp::endpoint listen_on(boost::asio::ip::tcp::acceptor& acceptor,
                                         const std::string& address, uint16_t port,
                                         const std::string& who);

}  // namespace shardlab::net
