// llamacpp/adapters/rpc_servers.hpp - llama.cpp's RPC backend for an engine on libllama: the
// ggml-rpc-server processes named by "HOST:PORT,HOST:PORT,..." become devices, and a model loaded
// after with n_gpu_layers > 0 puts its layers on them (split by their free memory, as --rpc does
// in llama.cpp's own tools). A model loaded with n_gpu_layers = 0 stays on this machine's CPU.
//
// ggml's RPC backend ends the process when a server cannot be reached (GGML_ABORT), so each
// endpoint is first checked here with a TCP connection of our own: a bad or unreachable endpoint
// is an exception naming it, not an abort. A server lost later, mid-decode, still ends the process
// (ggml's backend interface has no error path; the layers it held are gone).
#pragma once

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <ggml-backend.h>
#include <llama.h>

namespace specdec::llamacpp {

/// One "HOST:PORT" of an RPC server list.
struct rpc_endpoint {
  std::string host;
  std::string port;
};

/// Splits and checks "HOST:PORT,HOST:PORT,...": std::invalid_argument naming `flag` and the bad
/// entry (empty, no port, a port not in 1..65535). Resolves and connects to nothing.
inline std::vector<rpc_endpoint> parse_rpc_servers(const std::string& servers,
                                                   const std::string& flag = "--rpc") {
  std::vector<rpc_endpoint> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = servers.find(',', start);
    const std::string item = servers.substr(start, comma == std::string::npos ? std::string::npos
                                                                               : comma - start);
    const std::size_t colon = item.rfind(':');
    if (item.empty() || colon == std::string::npos || colon == 0 || colon + 1 == item.size())
      throw std::invalid_argument(flag + ": '" + item + "' is not HOST:PORT (in '" + servers +
                                  "')");
    const std::string port = item.substr(colon + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (*end != '\0' || p < 1 || p > 65535)
      throw std::invalid_argument(flag + ": '" + item + "': the port is not in 1..65535");
    out.push_back({item.substr(0, colon), port});
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

/// Whether a TCP connection to `e` opens (closed at once; ggml-rpc-server then waits for the
/// next client). Empty on success, else why not.
inline std::string rpc_unreachable(const rpc_endpoint& e) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(e.host.c_str(), e.port.c_str(), &hints, &found); rc != 0)
    return gai_strerror(rc);
  std::string why = "connection refused or unreachable";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const bool ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
    if (ok) {
      why.clear();
      break;
    }
  }
  freeaddrinfo(found);
  return why;
}

/// Registers the RPC servers in `servers` ("HOST:PORT,...") as ggml devices. Throws
/// std::invalid_argument naming `flag` for a malformed list, an endpoint that does not accept a
/// connection, or a llama.cpp built without its RPC backend (GGML_RPC=OFF). Call before loading
/// the models that should use them.
inline void add_rpc_servers(const std::string& servers, const std::string& flag = "--rpc") {
  const auto endpoints = parse_rpc_servers(servers, flag);
  if (!llama_supports_rpc())
    throw std::invalid_argument(flag + ": this llama.cpp was built without its RPC backend "
                                       "(GGML_RPC=ON builds it)");
  ggml_backend_load_all();
  ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
  using add_server_fn = ggml_backend_reg_t (*)(const char* endpoint);
  auto add = rpc ? reinterpret_cast<add_server_fn>(
                       ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_add_server"))
                 : nullptr;
  if (add == nullptr)
    throw std::invalid_argument(flag + ": llama.cpp's RPC backend is not loaded");
  for (const auto& e : endpoints) {  // every one checked before any is added
    if (const std::string why = rpc_unreachable(e); !why.empty())
      throw std::invalid_argument(flag + ": cannot connect to " + e.host + ":" + e.port + " (" +
                                  why + "); is ggml-rpc-server running there?");
  }
  for (const auto& e : endpoints) ggml_backend_register(add((e.host + ":" + e.port).c_str()));
}

}  // namespace specdec::llamacpp
