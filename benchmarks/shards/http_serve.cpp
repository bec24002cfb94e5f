// crema-http-serve ROOT: serves the files under ROOT on 127.0.0.1 (a port the system picks) as an
// object store does — byte ranges, kept connections — with the server of crema's HTTP tests
// (tests/common/loopback_http_server.hpp). Prints its URL, then serves until its standard input
// closes: benchmarks/shards/run_http.py reads shards from it beside the same files.

#include "common/loopback_http_server.hpp"

#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2 || !std::filesystem::is_directory(argv[1])) {
    std::fprintf(stderr, "usage: crema-http-serve ROOT (a folder)\n");
    return 2;
  }
  try {
    crema::test::loopback_http_server server(argv[1]);
    std::printf("%s\n", server.url("").c_str());
    std::fflush(stdout);
    for (std::string line; std::getline(std::cin, line);) {
    }
    std::printf("requests %zu, connections %zu\n", server.requests(), server.connections());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "crema-http-serve: %s\n", error.what());
    return 1;
  }
  return 0;
}
