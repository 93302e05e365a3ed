#include "oracles/io/text_file.hpp"

#include <cstdint>
#include <span>
#include <vector>

#include "oracles/io/atomic_file.hpp"

namespace ttr::io {

void write_text_atomic(const std::filesystem::path& path, const std::string& text) {
  write_file_atomic(path, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

std::string read_text_file(const std::filesystem::path& path) {
  const std::vector<std::uint8_t> bytes = read_regular_file(path);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace ttr::io
