// No command destroys a file it was not asked to write (oracles/io/paths.hpp):
// an output that is an input or another output, an output that is a FIFO or a
// device node, an input that is a stream, and a negative seed are refused with
// exit 2 and one line naming the options — and every input is byte for byte
// what it was before the command ran.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/cli.hpp"

namespace {

namespace fs = std::filesystem;
using ttr::test::CliResult;
using ttr::test::run_cli;
using ttr::test::TempDir;

std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// A workspace with the demo's inputs, a candidate and a report to misuse.
class OutputPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path demo = ttr::test::source_dir() / "examples" / "demo";
    fs::copy_file(demo / "gated_delta_rule.demo.realistic_small.inputs.safetensors", in_);
    const CliResult run = run_cli({"run", "--layer", "gated_delta_rule", "--in", in_, "--out", cand_, "--arith",
                                   "bf16", "--form", "chunk", "--chunk-size", "16"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const CliResult check = run_cli({"check", "--layer", "gated_delta_rule", "--in", in_, "--candidate", cand_,
                                     "--report", report_});
    ASSERT_LE(check.exit_code, 1) << check.err;
  }

  // Runs `args`, expects exit 2 with one stderr line containing `needle`, and
  // every file of the workspace unchanged.
  void refused(const std::vector<std::string>& args, const std::string& needle) {
    const std::string in = bytes_of(in_), cand = bytes_of(cand_), rep = bytes_of(report_);
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(bytes_of(in_), in) << "the inputs changed";
    EXPECT_EQ(bytes_of(cand_), cand) << "the candidate changed";
    EXPECT_EQ(bytes_of(report_), rep) << "the report changed";
  }

  TempDir tmp_;
  std::string in_ = tmp_ / "in.safetensors", cand_ = tmp_ / "cand.safetensors", report_ = tmp_ / "rep.json";
};

TEST_F(OutputPaths, OracleAndRunNeverWriteOverTheirInput) {
  refused({"oracle", "--layer", "gated_delta_rule", "--in", in_, "--out", in_}, "is the same file as --in");
  refused({"run", "--layer", "gated_delta_rule", "--in", in_, "--out", in_, "--arith", "fp32"},
          "is the same file as --in");
  // Through another spelling of the path and through a hard link: the same file.
  refused({"oracle", "--layer", "gated_delta_rule", "--in", in_, "--out", tmp_ / "./in.safetensors"},
          "is the same file as --in");
  fs::create_hard_link(in_, tmp_ / "link.safetensors");
  refused({"oracle", "--layer", "gated_delta_rule", "--in", in_, "--out", tmp_ / "link.safetensors"},
          "is the same file as --in");
}

TEST_F(OutputPaths, CheckNeverWritesOverItsInputsOrOneOutputOverAnother) {
  refused({"check", "--layer", "gated_delta_rule", "--in", in_, "--candidate", cand_, "--report", cand_},
          "--report " + cand_ + " is the same file as --candidate");
  refused({"check", "--layer", "gated_delta_rule", "--in", in_, "--candidate", cand_, "--report", tmp_ / "r.xml",
           "--junit", tmp_ / "r.xml"},
          "name the same file");
  EXPECT_FALSE(fs::exists(tmp_ / "r.xml"));
}

TEST_F(OutputPaths, BaselineRecordNeverWritesOverAReport) {
  refused({"baseline", "record", "--report", report_, "--out", report_}, "is the same file as --report");
}

TEST_F(OutputPaths, FifosAndDevicesAreNeitherReplacedNorReadWhole) {
  const std::string fifo = tmp_ / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  refused({"oracle", "--layer", "gated_delta_rule", "--in", in_, "--out", fifo}, "is a FIFO, not a regular file");
  EXPECT_EQ(ttr::test::entries_of(tmp_.path()).size(), 4u);  // in, cand, rep, pipe: no temporary left
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  // /dev/null stays a character device (the test may run as root).
  refused({"run", "--layer", "gated_delta_rule", "--in", in_, "--out", "/dev/null", "--arith", "fp32"},
          "is a character device, not a regular file");
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // A stream as input is refused before anything is read (no std::bad_alloc).
  refused({"oracle", "--layer", "gated_delta_rule", "--in", "/dev/zero", "--out", tmp_ / "o.safetensors"},
          "--in /dev/zero: is a character device, not a regular file");
  EXPECT_FALSE(fs::exists(tmp_ / "o.safetensors"));
}

TEST_F(OutputPaths, NegativeSeedsAreRefused) {
  refused({"vectors", "--layer", "gated_delta_rule", "--suite", "tiny", "--out", tmp_ / "v", "--seed", "-1"},
          "is negative");
  EXPECT_FALSE(fs::exists(tmp_ / "v"));
  refused({"gate", "--seed", "-3", "--out", tmp_ / "g"}, "is negative");
}

}  // namespace
