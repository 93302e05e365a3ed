#include "oracles/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <string>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "oracles/error.hpp"
#include "oracles/io/printable.hpp"

namespace ttr::io {
namespace {

std::string errno_text(int err) { return std::generic_category().message(err); }

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& message) {
  throw InputError(printable(path.string(), 4096) + ": " + message);
}

[[noreturn]] void cannot_write(const std::filesystem::path& path, const std::string& reason) {
  fail(path, "cannot write: " + reason);
}

// A temporary file that is removed unless committed: whatever goes wrong between its
// creation and the rename, no partial file is left behind.
class TempFile {
 public:
  explicit TempFile(const std::filesystem::path& target) : target_(target) {
    static std::atomic<unsigned> counter{0};
    const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
    for (int attempt = 0; attempt < 100; ++attempt) {
      path_ = dir / fmt::format(".{}.tmp.{}.{}", target.filename().string(), ::getpid(), counter++);
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // mode honours the umask
      if (fd_ >= 0) return;
      if (errno != EEXIST) cannot_write(target_, errno_text(errno));
    }
    cannot_write(target_, "could not create a unique temporary file");
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }

  void write_all(std::span<const std::uint8_t> bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) cannot_write(target_, n < 0 ? errno_text(errno) : "write made no progress");
      bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
  }

  // fsync before rename: otherwise a crash could leave the new name pointing at a file
  // whose data never reached the disk.
  void commit() {
    if (::fsync(fd_) != 0) cannot_write(target_, errno_text(errno));
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) cannot_write(target_, errno_text(errno));
    if (::rename(path_.c_str(), target_.c_str()) != 0) cannot_write(target_, errno_text(errno));
    committed_ = true;
    sync_directory();
  }

 private:
  // Makes the rename itself durable. Best effort: the new file is already in place
  // and complete, so a failure here is no reason to report the write as failed.
  void sync_directory() const {
    const std::filesystem::path dir = path_.parent_path();
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)::fsync(fd);
    ::close(fd);
  }

  std::filesystem::path target_;
  std::filesystem::path path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

std::vector<std::uint8_t> read_regular_file(const std::filesystem::path& path) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once (it is then refused
  // below) instead of blocking; reads of a regular file are not affected.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, "cannot read: " + errno_text(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::vector<std::uint8_t> bytes;
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, "cannot read: " + errno_text(errno));
  // open() succeeds on a directory; say so instead of reporting EISDIR from read().
  if (S_ISDIR(st.st_mode)) fail(path, "cannot read: it is a directory");
  // A stream (/dev/zero, a FIFO) has no size to bound the read by and may never
  // end: only regular files are read (oracles/io/paths.hpp).
  if (!S_ISREG(st.st_mode)) fail(path, "cannot read: not a regular file (a device, FIFO or socket)");
  bytes.reserve(static_cast<std::size_t>(st.st_size));
  std::array<std::uint8_t, 1 << 16> chunk{};
  for (;;) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, "cannot read: " + errno_text(errno));
    if (n == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  }
  return bytes;
}

void write_file_atomic(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  if (!path.has_filename()) cannot_write(path, "the path names a directory, not a file");
  TempFile temp(path);
  temp.write_all(bytes);
  temp.commit();
}

}  // namespace ttr::io
