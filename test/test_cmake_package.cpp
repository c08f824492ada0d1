// The installed CMake package: make check-test runs `make install DESTDIR=<stage>
// PREFIX=/opt/gemmkit` (the Makefile's install-stage rule), and these tests point a CMake
// project, test/cmake_consumer, at the staged prefix with find_package(gemmkit): it must
// configure, link against gemmkit::gemmkit and gemmkit::gemmkit_static, and run. Host
// runs only (under qemu the library is arm64, the CMake project host code).
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#ifndef GK_TEST_SANFLAGS
#define GK_TEST_SANFLAGS ""
#endif

namespace {
// The prefix under the stage: the PREFIX the Makefile's install-stage rule passes.
const char* const kStagePrefix = "/opt/gemmkit";

std::string helpers_dir() {
  const char* dir = std::getenv("GEMMKIT_TEST_HELPERS");
  return dir ? dir : "build/test";
}

bool emulated() {
  const char* runner = std::getenv("GEMMKIT_TEST_RUNNER");
  return runner && runner[0];
}

// Runs a shell command with make's job-server variables removed (cmake --build runs make),
// returns its exit status (-1 if it did not exit) and its output, stderr included.
int run(const std::string& cmd, std::string* out) {
  const std::string full = "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL " + cmd + " 2>&1";
  out->clear();
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) *out += buf;
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The staged prefix as an absolute path (CMake reads a relative CMAKE_PREFIX_PATH from
// the build folder), or "" with a failure recorded when make did not stage it.
std::string staged_prefix() {
  const std::string prefix = std::filesystem::absolute(helpers_dir() + "/install-stage" + kStagePrefix);
  const std::string config = prefix + "/lib/cmake/gemmkit/gemmkitConfig.cmake";
  if (std::filesystem::exists(config)) return prefix;
  ADD_FAILURE() << config << " is missing: make check-test stages the install there";
  return "";
}

// Configures test/cmake_consumer in a fresh build folder against the staged package.
int configure(const std::string& prefix, const std::string& build_dir, const std::string& extra,
              std::string* out) {
  std::string ignored;
  run("rm -rf " + quoted(build_dir), &ignored);
  return run("cmake -S test/cmake_consumer -B " + quoted(build_dir) + " -DCMAKE_PREFIX_PATH=" + quoted(prefix) +
                 " " + extra,
             out);
}
}  // namespace

TEST(CMakePackage, FindPackageTargetsLinkAndRun) {
  if (emulated()) GTEST_SKIP() << "the CMake project is host code; the host run checks the package";
  const std::string prefix = staged_prefix();
  if (prefix.empty()) return;
  std::string out;
  ASSERT_EQ(run("cmake --version", &out), 0) << "cmake not found (scripts/install-deps.sh test installs it)\n"
                                             << out;

  const std::string build_dir = helpers_dir() + "/cmake_consumer";
  const std::string sanflags = GK_TEST_SANFLAGS;
  ASSERT_EQ(configure(prefix, build_dir,
                      "-DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=" + quoted(sanflags) +
                          " -DCMAKE_EXE_LINKER_FLAGS=" + quoted(sanflags),
                      &out),
            0)
      << out;
  // The package found is the staged one, not one installed on the machine.
  EXPECT_NE(out.find("gemmkit 0.1.0 found in "), std::string::npos) << out;
  EXPECT_NE(out.find(prefix + "/lib/cmake/gemmkit"), std::string::npos) << out;

  ASSERT_EQ(run("cmake --build " + quoted(build_dir), &out), 0) << out;
  for (const char* program : {"consumer_shared", "consumer_static"}) {
    EXPECT_EQ(run(quoted(build_dir + "/" + program), &out), 0) << program << ": " << out;
    EXPECT_EQ(out, "ok\n") << program;
  }
}

TEST(CMakePackage, VersionRequests) {
  if (emulated()) GTEST_SKIP() << "the CMake project is host code; the host run checks the package";
  const std::string prefix = staged_prefix();
  if (prefix.empty()) return;
  // Configure-only runs (no compiler): which versions find_package accepts from 0.1.0.
  const struct {
    const char* want;
    bool found;
  } cases[] = {{"0", true},        {"0.1", true},       {"0.1.0", true},     {"0.0.9", true},
               {"0.2", false},     {"1.0", false},      {"0.1...1.0", true}, {"0...<0.1.0", false},
               {"0.2...1.0", false}};
  const std::string build_dir = helpers_dir() + "/cmake_consumer_version";
  for (const auto& c : cases) {
    std::string out;
    const int rc = configure(prefix, build_dir, "-DGEMMKIT_FIND_ONLY=ON -DGEMMKIT_WANT=" + quoted(c.want), &out);
    EXPECT_EQ(rc == 0, c.found) << "find_package(gemmkit " << c.want << ")\n" << out;
    // A refusal must come from the version file, not from a package that was not found.
    if (!c.found) {
      EXPECT_NE(out.find("considered but not accepted"), std::string::npos) << out;
    }
  }
}
