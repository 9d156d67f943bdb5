#ifndef NEPTUNE_BENCH_PROCESS_H
#define NEPTUNE_BENCH_PROCESS_H
/** \file
 * Child processes without a shell (no quoting to get wrong): run one and wait, run one and capture
 * its output, or start one with pipes to talk to. */
#include <string>
#include <sys/types.h>
#include <vector>

namespace neptune::bench {

/** Runs argv[0] (searched on the PATH) with the benchmark's stdin, stdout and stderr; returns its exit
 * status, 128 + N when killed by signal N, or 127 when it cannot be started. */
int run_command(const std::vector<std::string> &argv);

struct CommandOutput {
    int status = 127;
    std::string output;  // stdout, and stderr too when asked
};
/** Runs argv and captures its stdout (and stderr with `with_stderr`). */
CommandOutput capture_command(const std::vector<std::string> &argv, bool with_stderr = false);

/** A started child: its pid, a pipe to its stdin and one from its stdout (-1 when not piped). */
struct Child {
    pid_t pid = -1;
    int to_stdin = -1, from_stdout = -1;
};
/** Starts argv with `extra_env` ("NAME=value") added to the environment; throws std::runtime_error
 * when it cannot be started. Its stderr is the benchmark's. */
Child spawn_piped(const std::vector<std::string> &argv, const std::vector<std::string> &extra_env = {});

/** The absolute path of a program on the PATH (or `name` itself if it contains a '/' and exists), or "". */
std::string find_on_path(const std::string &name);

/** A file of the repository (e.g. "scripts/plot_sweep.py"): found from the benchmark binary where the
 * build puts it (build/apps/neptune_bench/neptune_bench), else from the current folder (a run from
 * the repository root, as on the GPU machine), else next to the binary; "" when none exists. */
std::string repo_file(const char *argv0, const std::string &relative_to_repo);

}  // namespace neptune::bench

#endif
