#include "Process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

extern char **environ;

namespace neptune::bench {

namespace {

std::vector<char *> c_strings(std::vector<std::string> &v) {
    std::vector<char *> out;
    for (std::string &s : v) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
}

int exit_status(pid_t pid) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return 127;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 127;
}

// Starts argv with the given file actions; -1 when it cannot be started.
pid_t start(const std::vector<std::string> &argv, posix_spawn_file_actions_t *actions,
            const std::vector<std::string> &extra_env) {
    std::vector<std::string> args = argv, env;
    for (char **e = environ; *e; e++) env.push_back(*e);
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<char *> a = c_strings(args), e = c_strings(env);
    pid_t pid = -1;
    if (posix_spawnp(&pid, a[0], actions, nullptr, a.data(), e.data()) != 0) return -1;
    return pid;
}

}  // namespace

int run_command(const std::vector<std::string> &argv) {
    const pid_t pid = start(argv, nullptr, {});
    return pid < 0 ? 127 : exit_status(pid);
}

CommandOutput capture_command(const std::vector<std::string> &argv, bool with_stderr) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return {};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    if (with_stderr) posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    const pid_t pid = start(argv, &fa, {});
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    CommandOutput out;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        out.output.append(buf, size_t(n));
    }
    close(fds[0]);
    out.status = pid < 0 ? 127 : exit_status(pid);
    return out;
}

Child spawn_piped(const std::vector<std::string> &argv, const std::vector<std::string> &extra_env) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    const pid_t pid = start(argv, &fa, extra_env);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (pid < 0) {
        close(in[1]);
        close(out[0]);
        throw std::runtime_error("cannot start " + argv.at(0));
    }
    return {pid, in[1], out[0]};
}

std::string find_on_path(const std::string &name) {
    struct stat st {};
    auto executable = [&](const std::string &p) {
        return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
    };
    if (name.find('/') != std::string::npos) return executable(name) ? name : "";
    const char *path = std::getenv("PATH");
    std::string dirs = path ? path : "/usr/bin:/bin";
    for (size_t b = 0; b <= dirs.size();) {
        size_t e = dirs.find(':', b);
        if (e == std::string::npos) e = dirs.size();
        const std::string dir = e > b ? dirs.substr(b, e - b) : ".";
        if (executable(dir + "/" + name)) return dir + "/" + name;
        b = e + 1;
    }
    return "";
}

std::string repo_file(const char *argv0, const std::string &relative_to_repo) {
    const std::string exe = argv0;
    const size_t slash = exe.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : exe.substr(0, slash);
    const size_t base = relative_to_repo.rfind('/');
    for (const std::string &p :
         {dir + "/../../../" + relative_to_repo, relative_to_repo,
          dir + "/" + (base == std::string::npos ? relative_to_repo : relative_to_repo.substr(base + 1))})
        if (std::ifstream(p)) return p;
    return "";
}

}  // namespace neptune::bench
