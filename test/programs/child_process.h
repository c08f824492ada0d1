// Child processes for the reliability tests (test/test_reliability.cpp, the GEMM side;
// test/test_conv_reliability.cpp, the convolution side): run a program or a forked body,
// collect its output and exit status, so that a signal there is a failure here.
#pragma once
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace child_process {

// ---------------------------------------------------------------- child processes

struct ChildResult {
  int status = 0;  // as waitpid reports it
  bool timed_out = false;
  std::string output;  // stdout and stderr together
};

// What went wrong with a child, or "" when it exited with `expected_exit`.
inline std::string child_failure(const ChildResult& r, int expected_exit = 0) {
  std::ostringstream why;
  if (r.timed_out) why << "timed out; ";
  if (WIFSIGNALED(r.status)) {
    why << "killed by signal " << WTERMSIG(r.status) << " (" << strsignal(WTERMSIG(r.status)) << ")";
  } else if (!WIFEXITED(r.status)) {
    why << "ended with wait status " << r.status;
  } else if (WEXITSTATUS(r.status) != expected_exit) {
    why << "exited " << WEXITSTATUS(r.status);
  } else {
    return "";
  }
  return why.str() + "; output:\n" + r.output;
}

// Reads the child's output until it closes it or `deadline` passes (then kills it), and
// waits for it.
inline ChildResult collect(pid_t pid, int out_fd, std::chrono::steady_clock::time_point deadline) {
  ChildResult r;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{out_fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000))) <= 0) continue;
    const ssize_t n = read(out_fd, buf, sizeof buf);
    if (n <= 0) break;
    r.output.append(buf, static_cast<size_t>(n));
  }
  close(out_fd);
  waitpid(pid, &r.status, 0);
  return r;
}

// Runs `argv` (prefixed by GEMMKIT_TEST_RUNNER's words under qemu) with `env` added to the
// environment, in a new process.
inline ChildResult run_program(std::vector<std::string> argv, const std::vector<std::string>& env, int timeout_s) {
  if (const char* runner = std::getenv("GEMMKIT_TEST_RUNNER")) {
    std::istringstream words(runner);
    std::vector<std::string> prefix;
    for (std::string w; words >> w;) prefix.push_back(w);
    argv.insert(argv.begin(), prefix.begin(), prefix.end());
  }
  // Everything exec needs is built before fork: the child only dups, execs and exits.
  std::vector<char*> args, envp;
  for (std::string& a : argv) args.push_back(&a[0]);
  args.push_back(nullptr);
  std::vector<std::string> env_strings(env);
  for (char** e = environ; *e; ++e) env_strings.push_back(*e);  // later entries lose
  for (std::string& e : env_strings) envp.push_back(&e[0]);
  envp.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return {-1, false, "pipe failed"};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return {-1, false, "fork failed"};
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execvpe(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  return collect(pid, fds[0], std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s));
}

inline std::string helper_path(const char* program = "shared_reliability_child") {
  const char* dir = std::getenv("GEMMKIT_TEST_HELPERS");
  return std::string(dir ? dir : "build/test") + "/" + program;
}

// test/programs/reliability_child.cpp in `mode`.
inline ChildResult run_helper(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                       int timeout_s = 300) {
  std::vector<std::string> argv{helper_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, env, timeout_s);
}

// test/programs/conv_reliability_child.cpp in `mode`.
inline ChildResult run_conv_helper(const std::vector<std::string>& args, const std::vector<std::string>& env = {},
                                   int timeout_s = 300) {
  std::vector<std::string> argv{helper_path("shared_conv_reliability_child")};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(argv, env, timeout_s);
}

constexpr int kSkipped = 77;  // the helper's exit status for "does not apply here"

// Runs body() in a forked child of this process; its result ("" = passed, else why not)
// comes back through a pipe. The child is single-threaded for the library when this
// process has run threads (libgomp is not fork-safe).
inline ChildResult run_in_child(const std::function<std::string()>& body, int timeout_s = 300) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, false, "pipe failed"};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return {-1, false, "fork failed"};
  if (pid == 0) {
    close(fds[0]);
    const std::string why = body();
    if (!why.empty() && write(fds[1], why.data(), why.size()) < 0) _exit(2);
    _exit(why.empty() ? 0 : 1);
  }
  close(fds[1]);
  return collect(pid, fds[0], std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s));
}

inline bool emulated() {
  const char* runner = std::getenv("GEMMKIT_TEST_RUNNER");
  return runner && *runner;
}

inline int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}


}  // namespace child_process
