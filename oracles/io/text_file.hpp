// Atomic text output (oracles/io/atomic_file.hpp): a reader never sees a
// half-written report, manifest or reproducer.
#pragma once

#include <filesystem>
#include <string>

namespace ttr::io {

// InputError("<path>: cannot write: <reason>") on failure; no file is left behind.
void write_text_atomic(const std::filesystem::path& path, const std::string& text);

}  // namespace ttr::io
