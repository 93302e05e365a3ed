#include "oracles/io/printable.hpp"

#include <fmt/format.h>

namespace ttr::io {

std::string printable(std::string_view s, std::size_t max_bytes) {
  std::string out;
  for (const char ch : s) {
    if (out.size() >= max_bytes) {
      // Do not leave half a UTF-8 sequence behind.
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0u) == 0x80u) out.pop_back();
      if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0u) out.pop_back();
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20u || c == 0x7Fu) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace ttr::io
