#include "neptune/CompileCuda.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <nvrtc.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <type_traits>

extern char **environ;

namespace neptune::internal {

namespace {

namespace fs = std::filesystem;

/** "sm_90a" -> "90a". Accepts sm_XX, compute_XX and bare XX, with an optional a or f suffix. */
std::string arch_digits(const std::string &arch, const char *who) {
    std::string d = arch;
    for (const char *prefix : {"sm_", "compute_"})
        if (d.rfind(prefix, 0) == 0) d = d.substr(std::char_traits<char>::length(prefix));
    size_t n = 0;
    while (n < d.size() && std::isdigit(static_cast<unsigned char>(d[n]))) n++;
    const bool ok = n >= 2 && (n == d.size() || (n + 1 == d.size() && (d[n] == 'a' || d[n] == 'f')));
    if (!ok)
        throw CompileFailure(std::string(who) + ": arch '" + arch +
                             "' is not sm_XX, compute_XX or XX (with an optional a or f suffix)");
    return d;
}

/** A name usable as a file name in the dump directory. */
std::string file_stem(const std::string &name) {
    std::string s = name.empty() ? "kernel" : name;
    for (char &c : s)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
    return s;
}

void write_file(const fs::path &path, const char *data, size_t size) {
    std::ofstream out(path, std::ios::binary);
    out.write(data, static_cast<std::streamsize>(size));
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read_file(const fs::path &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/** With NEPTUNE_DUMP_CUDA=<dir>: <dir>/<stem>.cu, .ptx (when there is PTX) and .log. A dump that
 * cannot be written is reported, never allowed to fail the compilation. */
void dump(const std::string &name, const std::string &source, const std::string &ptx, const std::string &log) {
    const char *dir = std::getenv("NEPTUNE_DUMP_CUDA");
    if (!dir || !*dir) return;
    try {
        fs::create_directories(dir);
        const fs::path stem = fs::path(dir) / file_stem(name);
        write_file(stem.string() + ".cu", source.data(), source.size());
        if (!ptx.empty()) write_file(stem.string() + ".ptx", ptx.data(), ptx.size());
        write_file(stem.string() + ".log", log.data(), log.size());
    } catch (const std::exception &e) { std::fprintf(stderr, "neptune: NEPTUNE_DUMP_CUDA: %s\n", e.what()); }
}

/** With NEPTUNE_CUDA_OVERRIDE=<dir>: the source of <dir>/<stem>.cu, where there is one, in place of the
 * emitted source (an edited NEPTUNE_DUMP_CUDA dump, for trying a change by hand before the compiler
 * makes it). Announced on stderr, since the kernel then is not what Neptune emitted. */
std::string overridden(const std::string &name, const std::string &source) {
    const char *dir = std::getenv("NEPTUNE_CUDA_OVERRIDE");
    if (!dir || !*dir) return source;
    const fs::path path = fs::path(dir) / (file_stem(name) + ".cu");
    if (!fs::exists(path)) return source;
    std::fprintf(stderr, "neptune: NEPTUNE_CUDA_OVERRIDE: compiling %s in place of the emitted '%s'\n", path.c_str(),
                 name.c_str());
    return read_file(path);
}

void nvrtc_check(nvrtcResult r, const char *call, const std::string &program) {
    if (r != NVRTC_SUCCESS)
        throw CompileFailure(std::string(call) + " failed for '" + program + "': " + nvrtcGetErrorString(r));
}

struct ProgramDeleter {
    void operator()(nvrtcProgram p) const { nvrtcDestroyProgram(&p); }
};
using Program = std::unique_ptr<std::remove_pointer_t<nvrtcProgram>, ProgramDeleter>;

/** A fresh directory under $TMPDIR (or /tmp), removed with everything in it at scope exit. */
struct TempDir {
    fs::path path;
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "neptune-nvcc-XXXXXX").string();
        if (!mkdtemp(pattern.data())) throw CompileFailure("nvcc_compile: cannot create a temporary directory");
        path = pattern;
    }
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
};

/** Runs argv[0] (an absolute path) without a shell, stdout and stderr into `log_path`; its exit status. */
int run_process(const std::vector<std::string> &argv, const fs::path &log_path) {
    std::vector<char *> args;
    for (const std::string &a : argv) args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = 0;
    const int err = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) throw CompileFailure("cannot run " + argv[0] + ": " + std::strerror(err));
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) throw CompileFailure("waiting for " + argv[0] + ": " + std::strerror(errno));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/** `relative` under the toolkit ($CUDA_PATH, else /usr/local/cuda); "" where neither has it. */
std::string toolkit_file(const std::string &relative) {
    const char *cuda_path = std::getenv("CUDA_PATH");
    for (const std::string &root : {std::string(cuda_path ? cuda_path : ""), std::string("/usr/local/cuda")}) {
        if (root.empty()) continue;
        const fs::path path = fs::path(root) / relative;
        if (access(path.c_str(), R_OK) == 0) return path.string();
    }
    return "";
}

std::string command_line(const std::vector<std::string> &argv) {
    std::string s;
    for (const std::string &a : argv) s += (s.empty() ? "" : " ") + a;
    return s;
}

/** The integer just before `unit` in `line` ("40" in "Used 40 registers" for " registers"); -1 if none. */
int value_before(const std::string &line, const std::string &unit) {
    size_t end = line.find(unit);
    if (end == std::string::npos) return -1;
    size_t begin = end;
    while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) begin--;
    return begin == end ? -1 : std::atoi(line.substr(begin, end - begin).c_str());
}

/** Whether the symbol ptxas reports is `name`: verbatim, or demangled without its parameters and
 * return type, with or without the namespaces. */
bool symbol_matches(const std::string &symbol, const std::string &name) {
    if (symbol == name) return true;
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> demangled(
        abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), &std::free);
    if (status != 0 || !demangled) return false;
    std::string s = demangled.get();
    if (!s.empty() && s.back() == ')') {  // drop the parameter list, matching parentheses from the end
        int depth = 0;
        size_t i = s.size();
        while (i-- > 0) {
            depth += s[i] == ')' ? 1 : s[i] == '(' ? -1 : 0;
            if (depth == 0) break;
        }
        s = s.substr(0, i);
    }
    if (s.rfind("void ", 0) == 0) s = s.substr(5);  // function templates carry their return type
    const std::string scoped = "::" + name;
    return s == name || (s.size() > scoped.size() && s.compare(s.size() - scoped.size(), scoped.size(), scoped) == 0);
}

/** The device's sm_XY, keeping the a/f suffix of `requested` when its digits are the device's. */
std::string device_arch(const neptune_device_info &info, const std::string &requested) {
    const std::string digits = std::to_string(info.cc_major) + std::to_string(info.cc_minor);
    const std::string want = arch_digits(requested, "ModuleCache");
    if (want.size() == digits.size() + 1 && want.compare(0, digits.size(), digits) == 0) return "sm_" + want;
    return "sm_" + digits;
}

/** Every field, length-prefixed so that no two different option sets serialize alike. */
std::string cache_key(const NvrtcOptions &o, const std::string &source) {
    std::string key;
    auto add = [&key](const std::string &s) { key += std::to_string(s.size()) + ':' + s; };
    add(o.arch);
    add(o.cubin ? "cubin" : "ptx");
    key += "I" + std::to_string(o.include_dirs.size());
    for (const std::string &d : o.include_dirs) add(d);
    key += "H" + std::to_string(o.headers.size());
    for (const auto &[name, contents] : o.headers) add(name), add(contents);
    key += "X" + std::to_string(o.extra.size());
    for (const std::string &e : o.extra) add(e);
    add(source);
    return key;
}

}  // namespace

CompiledModule nvrtc_compile(const std::string &emitted, const std::string &program_name, const NvrtcOptions &options) {
    const std::string source = overridden(program_name, emitted);
    const std::string digits = arch_digits(options.arch, "nvrtc_compile");
    const std::string arch = (options.cubin ? "sm_" : "compute_") + digits;
    std::vector<std::string> args = {"-std=c++17", "--gpu-architecture=" + arch, "-default-device", "-lineinfo"};
    for (const std::string &dir : options.include_dirs) args.push_back("-I" + dir);
    // NVRTC has no cuda_fp16.h or cuda_bf16.h of its own; the toolkit's, where there is one, come last.
    if (const std::string fp16 = toolkit_file("include/cuda_fp16.h"); !fp16.empty())
        args.push_back("-I" + fs::path(fp16).parent_path().string());
    args.insert(args.end(), options.extra.begin(), options.extra.end());

    std::vector<const char *> header_names, header_sources, arg_ptrs;
    for (const auto &[name, contents] : options.headers) {
        header_names.push_back(name.c_str());
        header_sources.push_back(contents.c_str());
    }
    for (const std::string &a : args) arg_ptrs.push_back(a.c_str());

    nvrtcProgram raw = nullptr;
    nvrtc_check(nvrtcCreateProgram(&raw, source.c_str(), (program_name + ".cu").c_str(),
                                   static_cast<int>(header_names.size()), header_sources.data(), header_names.data()),
                "nvrtcCreateProgram", program_name);
    Program program(raw);
    const nvrtcResult compiled = nvrtcCompileProgram(raw, static_cast<int>(arg_ptrs.size()), arg_ptrs.data());

    CompiledModule out;
    size_t size = 0;
    nvrtc_check(nvrtcGetProgramLogSize(raw, &size), "nvrtcGetProgramLogSize", program_name);
    out.log.resize(size);
    nvrtc_check(nvrtcGetProgramLog(raw, out.log.data()), "nvrtcGetProgramLog", program_name);
    while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();

    if (compiled != NVRTC_SUCCESS) {
        dump(program_name, source, "", out.log);
        throw CompileFailure("nvrtc_compile: '" + program_name + "' does not compile for " + arch + " (" +
                             nvrtcGetErrorString(compiled) + "):\n" + out.log);
    }
    if (options.cubin) {
        nvrtc_check(nvrtcGetCUBINSize(raw, &size), "nvrtcGetCUBINSize", program_name);
        out.cubin.resize(size);
        nvrtc_check(nvrtcGetCUBIN(raw, out.cubin.data()), "nvrtcGetCUBIN", program_name);
    } else {
        nvrtc_check(nvrtcGetPTXSize(raw, &size), "nvrtcGetPTXSize", program_name);
        out.ptx.resize(size);
        nvrtc_check(nvrtcGetPTX(raw, out.ptx.data()), "nvrtcGetPTX", program_name);
        while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
    }
    dump(program_name, source, out.ptx, out.log);
    return out;
}

namespace {

/** Runs nvcc (argv ends with "-o" `image` and the source) in `dir`; the image and nvcc's output, or
 * CompileFailure starting with `failure`. */
CompiledModule run_nvcc(const std::vector<std::string> &argv, const TempDir &dir, const std::string &name,
                        const std::string &source, const fs::path &image, const std::string &failure) {
    const int status = run_process(argv, dir.path / "nvcc.log");
    CompiledModule out;
    out.log = read_file(dir.path / "nvcc.log");
    dump(name, source, "", out.log);
    if (status != 0)
        throw CompileFailure(failure + " (exit " + std::to_string(status) + "): " + command_line(argv) + "\n" +
                             out.log);
    const std::string bytes = read_file(image);
    out.cubin.assign(bytes.begin(), bytes.end());
    return out;
}

}  // namespace

CompiledModule nvcc_compile(const std::string &source, const std::string &name, const std::string &arch,
                            const std::vector<std::string> &include_dirs) {
    const std::string digits = arch_digits(arch, "nvcc_compile");
    const std::string nvcc = toolkit_file("bin/nvcc");
    if (nvcc.empty())
        throw CompileFailure("nvcc_compile: no nvcc in $CUDA_PATH/bin or /usr/local/cuda/bin; set CUDA_PATH");
    TempDir dir;
    const std::string stem = file_stem(name);
    const fs::path cu = dir.path / (stem + ".cu"), cubin = dir.path / (stem + ".cubin");
    write_file(cu, source.data(), source.size());

    std::vector<std::string> argv = {
        nvcc, "-cubin", "-O3", "-std=c++17", "-gencode=arch=compute_" + digits + ",code=sm_" + digits, "-Xptxas", "-v"};
    for (const std::string &d : include_dirs) argv.push_back("-I" + d);
    argv.insert(argv.end(), {"-o", cubin.string(), cu.string()});
    return run_nvcc(argv, dir, name, source, cubin, "nvcc_compile: '" + name + "' does not compile for sm_" + digits);
}

CompiledModule nvcc_fatbin(const std::string &source, const std::string &name, const std::vector<std::string> &codes,
                           const std::vector<std::pair<std::string, std::string>> &headers) {
    const std::string nvcc = toolkit_file("bin/nvcc");
    if (nvcc.empty())
        throw CompileFailure("nvcc_fatbin: no nvcc in $CUDA_PATH/bin or /usr/local/cuda/bin; set CUDA_PATH");
    if (codes.empty()) throw CompileFailure("nvcc_fatbin: no target codes for '" + name + "'");
    TempDir dir;
    const std::string stem = file_stem(name);
    const fs::path cu = dir.path / (stem + ".cu"), fatbin = dir.path / (stem + ".fatbin");
    write_file(cu, source.data(), source.size());
    for (const auto &[header, contents] : headers) {
        const fs::path path = dir.path / "include" / header;
        fs::create_directories(path.parent_path());
        write_file(path, contents.data(), contents.size());
    }
    std::vector<std::string> argv = {
        nvcc, "-fatbin", "-O3", "-std=c++17", "-Xptxas", "-v", "-I" + (dir.path / "include").string()};
    for (const std::string &code : codes) {
        const bool ptx = code.rfind("compute_", 0) == 0;
        const std::string digits = arch_digits(code, "nvcc_fatbin");
        argv.push_back("-gencode=arch=compute_" + digits + ",code=" + (ptx ? "compute_" : "sm_") + digits);
    }
    argv.insert(argv.end(), {"-o", fatbin.string(), cu.string()});
    return run_nvcc(argv, dir, name, source, fatbin, "nvcc_fatbin: '" + name + "' does not compile");
}

ResourceUsage parse_ptxas_report(const std::string &log, const std::string &kernel_name) {
    // The report comes in sections:
    //   ptxas info    : Compiling entry function '_Z4smemPf' for 'sm_90a'
    //   ptxas info    : Function properties for _Z4smemPf
    //       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    //   ptxas info    : Used 12 registers, used 1 barriers, 4096 bytes smem
    // "Function properties" also appears for non-inlined device functions, so the stack and spill
    // line is taken only when the properties are the kernel's own.
    ResourceUsage usage;
    bool in_entry = false, in_properties = false;
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line)) {
        if (size_t at = line.find("Compiling entry function '"); at != std::string::npos) {
            const size_t begin = at + std::char_traits<char>::length("Compiling entry function '");
            in_entry = symbol_matches(line.substr(begin, line.find('\'', begin) - begin), kernel_name);
            in_properties = false;
        } else if (size_t at = line.find("Function properties for "); at != std::string::npos) {
            std::string symbol = line.substr(at + std::char_traits<char>::length("Function properties for "));
            while (!symbol.empty() && std::isspace(static_cast<unsigned char>(symbol.back()))) symbol.pop_back();
            in_properties = symbol_matches(symbol, kernel_name);
        } else if (line.find("bytes stack frame") != std::string::npos) {
            if (in_properties) {
                usage.stack_bytes = value_before(line, " bytes stack frame");
                usage.spill_stores = value_before(line, " bytes spill stores");
                usage.spill_loads = value_before(line, " bytes spill loads");
            }
            in_properties = false;
        } else if (in_entry && line.find(" registers") != std::string::npos) {
            usage.registers = value_before(line, " registers");
            const int smem = value_before(line, " bytes smem");
            usage.shared_bytes = smem < 0 ? 0 : smem;  // ptxas omits a zero
            in_entry = false;
        }
    }
    return usage;
}

ModuleCache::~ModuleCache() {
    for (auto &entry : modules) neptune_module_unload(entry.second);  // failures (driver gone) are harmless here
}

neptune_function *ModuleCache::get(const std::string &source, const std::string &kernel_name,
                                   const NvrtcOptions &options) {
    std::lock_guard<std::mutex> hold(lock);
    if (device.cc_major == 0) {  // asked once; a failed query leaves `device` untouched
        if (int rc = neptune_get_device_info(&device)) throw RuntimeFailure(rc, neptune_last_error());
    }
    NvrtcOptions effective = options;
    effective.cubin = true;  // no PTX JIT at load time, and no dependence on the driver's PTX version
    effective.arch = device_arch(device, options.arch);
    const std::string key = cache_key(effective, source);

    auto found = modules.find(key);
    if (found == modules.end()) {
        const CompiledModule compiled = nvrtc_compile(source, kernel_name, effective);
        neptune_module *module = nullptr;
        if (int rc = neptune_module_load(compiled.cubin.data(), &module))
            throw RuntimeFailure(rc, neptune_last_error());
        found = modules.emplace(key, module).first;
    }
    neptune_function *f = nullptr;
    if (int rc = neptune_module_get_function(found->second, kernel_name.c_str(), &f))
        throw RuntimeFailure(rc, neptune_last_error());
    return f;
}

}  // namespace neptune::internal
