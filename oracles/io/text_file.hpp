// Text files through oracles/io/atomic_file.hpp: atomic output (a reader never sees
// a half-written report, manifest or reproducer) and bounded input.
#pragma once

#include <filesystem>
#include <string>

namespace ttr::io {

// InputError("<path>: cannot write: <reason>") on failure; no file is left behind.
void write_text_atomic(const std::filesystem::path& path, const std::string& text);

// The text of a regular file (read_regular_file: a directory or a stream is refused).
std::string read_text_file(const std::filesystem::path& path);

}  // namespace ttr::io
