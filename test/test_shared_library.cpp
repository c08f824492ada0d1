// Runs the helper programs linked against the shared library (see test/programs): a
// program's own xerbla handlers win, and a cblas.h / Fortran program works unchanged.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace {
std::string run_helper(const char* name, int* status) {
  const char* dir = std::getenv("GEMMKIT_TEST_HELPERS");
  const char* runner = std::getenv("GEMMKIT_TEST_RUNNER");
  if (!dir) dir = "build/test";
  std::string cmd = std::string(runner ? runner : "") + " " + dir + "/" + name + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return "";
  }
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  *status = pclose(p);
  return out;
}
}  // namespace

TEST(SharedLibrary, ProgramXerblaHandlersInterpose) {
  int status = 0;
  std::string out = run_helper("shared_xerbla_override", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "ok\n");
}

TEST(SharedLibrary, CblasAndFortranProgramsLinkUnchanged) {
  int status = 0;
  std::string out = run_helper("shared_cblas_dropin", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "ok\n");
}
