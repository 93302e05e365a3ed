#include "oracles/io/text_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>

#include "oracles/error.hpp"

namespace ttr::io {

void write_text_atomic(const std::filesystem::path& path, const std::string& text) {
  const std::string tmp = path.string() + fmt::format(".tmp-{}", ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw InputError(fmt::format("{}: cannot write: {}", path.string(), std::strerror(errno)));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
                  ::fsync(::fileno(f)) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = ok ? errno : err;
    std::remove(tmp.c_str());
    throw InputError(fmt::format("{}: cannot write: {}", path.string(), std::strerror(e)));
  }
}

}  // namespace ttr::io
