// Whole-file reads and atomic writes, shared by every file ttrcheck reads or writes
// (safetensors, reports, JUnit, baselines, manifests, reproducers).
//
// A write goes to a temporary beside the target (hidden, created with O_EXCL: no
// two writers share one, in one process or several), is fsync'ed, then renamed
// over the target and the directory fsync'ed: a reader sees the old file or the
// new one, never half of one, and a failure at any point leaves the old file and
// no temporary. Which targets may be written at all (not an input, not a FIFO or
// device node) is oracles/io/paths.hpp's rule, checked before any work.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace ttr::io {

// InputError("<path>: cannot write: <reason>") on failure; no file is left behind.
void write_file_atomic(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

// The bytes of a regular file. InputError("<path>: cannot read: <reason>") when it
// cannot be opened or read, and for a directory or a stream (a device, FIFO or
// socket: no size to bound the read by, and /dev/zero never ends).
std::vector<std::uint8_t> read_regular_file(const std::filesystem::path& path);

}  // namespace ttr::io
