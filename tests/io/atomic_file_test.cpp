// oracles/io/atomic_file.hpp: the one writer and reader behind every file ttrcheck
// writes or reads. Each test looks at the directory afterwards: a write either
// replaces the target whole or leaves the old file and no temporary.
#include "oracles/io/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "oracles/error.hpp"
#include "oracles/io/text_file.hpp"
#include "tests/support/cli.hpp"

namespace ttr::test {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The InputError message of f(), "" when it does not throw one.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(AtomicFile, WritesAndReplacesWholeWithNoTemporaryLeft) {
  TempDir dir;
  const fs::path p = dir.path() / "out.bin";
  // Every byte value, NUL included: the writer is binary-exact.
  Bytes all(256);
  for (int i = 0; i < 256; ++i) all[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(i);
  io::write_file_atomic(p, all);
  EXPECT_EQ(io::read_regular_file(p), all);
  io::write_file_atomic(p, bytes_of("short"));
  EXPECT_EQ(contents(p), "short");  // replaced, not overwritten in place (no tail of the old file)
  io::write_text_atomic(p, std::string("a\0b", 3));
  EXPECT_EQ(contents(p), std::string("a\0b", 3));
  EXPECT_EQ(entries_of(dir.path()), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFile, EmptyFileRoundTrips) {
  TempDir dir;
  const fs::path p = dir.path() / "empty";
  io::write_file_atomic(p, Bytes{});
  EXPECT_TRUE(fs::is_regular_file(p));
  EXPECT_TRUE(io::read_regular_file(p).empty());
}

TEST(AtomicFile, FailedWritesLeaveNothing) {
  TempDir dir;
  const fs::path missing = dir.path() / "no_such_dir" / "out.bin";
  std::string msg = error_of([&] { io::write_file_atomic(missing, bytes_of("x")); });
  EXPECT_EQ(msg.rfind(missing.string() + ": cannot write: ", 0), 0u) << msg;
  EXPECT_FALSE(fs::exists(missing.parent_path()));

  // Onto an existing directory: the rename fails, the directory and its content stay.
  const fs::path sub = dir.path() / "sub";
  fs::create_directory(sub);
  io::write_file_atomic(sub / "inner", bytes_of("kept"));
  msg = error_of([&] { io::write_text_atomic(sub, "text"); });
  EXPECT_EQ(msg.rfind(sub.string() + ": cannot write: ", 0), 0u) << msg;
  msg = error_of([&] { io::write_text_atomic(dir.path() / "sub/", "text"); });
  EXPECT_NE(msg.find("names a directory"), std::string::npos) << msg;
  EXPECT_EQ(contents(sub / "inner"), "kept");
  EXPECT_EQ(entries_of(dir.path()), std::vector<std::string>{"sub"});
  EXPECT_EQ(entries_of(sub), std::vector<std::string>{"inner"});
}

// Concurrent writers of one target (two threads of one process, as the gate's
// workers could be): each writes its own temporary (O_EXCL), so the target ends as
// exactly one writer's bytes and no temporary is left. A temporary named by the
// process alone would be shared by both threads and could end with both contents
// interleaved.
TEST(AtomicFile, ConcurrentWritersOfOneTargetNeverMix) {
  TempDir dir;
  const fs::path p = dir.path() / "shared.txt";
  const std::string a(1 << 20, 'a'), b(1 << 20, 'b');
  for (int round = 0; round < 8; ++round) {
    std::thread ta([&] { io::write_text_atomic(p, a); });
    std::thread tb([&] { io::write_text_atomic(p, b); });
    ta.join();
    tb.join();
    const std::string got = contents(p);
    EXPECT_TRUE(got == a || got == b) << "round " << round << ": " << got.size() << " bytes, "
                                      << std::count(got.begin(), got.end(), 'a') << " of them 'a'";
    EXPECT_EQ(entries_of(dir.path()), std::vector<std::string>{"shared.txt"}) << "round " << round;
  }
}

TEST(AtomicFile, ReadsOnlyRegularFiles) {
  TempDir dir;
  const fs::path missing = dir.path() / "missing";
  std::string msg = error_of([&] { io::read_regular_file(missing); });
  EXPECT_EQ(msg.rfind(missing.string() + ": cannot read: ", 0), 0u) << msg;

  msg = error_of([&] { io::read_regular_file(dir.path()); });
  EXPECT_NE(msg.find("cannot read: it is a directory"), std::string::npos) << msg;

  // A stream has no size to bound the read by: refused before any read (a FIFO
  // with no writer would block a read forever; /dev/zero would never end).
  const fs::path fifo = dir.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  msg = error_of([&] { io::read_regular_file("/dev/zero"); });
  EXPECT_NE(msg.find("/dev/zero: cannot read: not a regular file"), std::string::npos) << msg;
  // No writer ever opens it: the reader must not wait for one.
  msg = error_of([&] { io::read_regular_file(fifo); });
  EXPECT_NE(msg.find("cannot read: not a regular file"), std::string::npos) << msg;
}

TEST(AtomicFile, MessagesKeepControlCharactersOnOneLine) {
  TempDir dir;
  const fs::path odd = dir.path() / "no\ndir" / "out";
  const std::string msg = error_of([&] { io::write_file_atomic(odd, bytes_of("x")); });
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  EXPECT_NE(msg.find("no\\x0adir"), std::string::npos) << msg;
}

}  // namespace
}  // namespace ttr::test
