// The cache of variants compiled on first use (ops/FirstUse.h), without a GPU: a deferred kernel
// set's image is compiled by the compiler library once, stored under the cache's kernels/ folder by
// its source's content hash, and read back from there by every later request, in this process or
// another; another source or family is another file. The compiler library is the real one
// (NEPTUNE_OPS_JIT), the cache a fresh folder.
#include <doctest/doctest.h>
#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "ops/FirstUse.h"

namespace {

const char *kSource = "extern \"C\" __global__ void first_use_probe(float *x) { x[threadIdx.x] *= 2.0f; }\n";

std::vector<std::string> files_in(const std::string &dir) {
    std::vector<std::string> names;
    if (DIR *d = opendir(dir.c_str())) {
        while (const dirent *e = readdir(d))
            if (e->d_name[0] != '.') names.push_back(e->d_name);
        closedir(d);
    }
    return names;
}

/** A fresh cache folder for this process. */
std::string fresh_cache() {
    char tmpl[] = "/tmp/neptune-first-use-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    setenv("NEPTUNE_CACHE_DIR", tmpl, 1);
    return tmpl;
}

/** The one folder under ops/ (this compiler library's identity). */
std::string identity_dir(const std::string &root) {
    const std::vector<std::string> ids = files_in(root + "/ops");
    REQUIRE(ids.size() == 1);
    return root + "/ops/" + ids[0];
}

}  // namespace

TEST_CASE("first use: a deferred kernel set is compiled once and read back from the cache") {
    REQUIRE_MESSAGE(std::getenv("NEPTUNE_OPS_JIT"), "NEPTUNE_OPS_JIT names the compiler library (meson test sets it)");
    const std::string root = fresh_cache();
    const std::string image = neptune::ops::first_use_kernels(kSource, "sm_90a", "probe");
    CHECK(image.substr(0, 4) ==
          "\x7f"
          "ELF");
    const std::string kernels = identity_dir(root) + "/kernels";
    std::vector<std::string> files = files_in(kernels);
    REQUIRE(files.size() == 1);
    CHECK(files[0].find("-sm_90a.cubin") != std::string::npos);
    {
        std::ifstream in(kernels + "/" + files[0], std::ios::binary);
        const std::string stored((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        CHECK(stored == image);
    }
    // A later request reads the file, not the compiler: what the file holds is what comes back.
    std::ofstream(kernels + "/" + files[0], std::ios::binary | std::ios::trunc) << "cached image";
    CHECK(neptune::ops::first_use_kernels(kSource, "sm_90a", "probe") == "cached image");
    // Another family, or another source, is compiled and stored beside it.
    CHECK(neptune::ops::first_use_kernels(kSource, "sm_80", "probe").substr(0, 4) ==
          "\x7f"
          "ELF");
    CHECK(neptune::ops::first_use_kernels(std::string(kSource) + "// another\n", "sm_90a", "probe") != "cached image");
    CHECK(files_in(kernels).size() == 3);
}

TEST_CASE("first use: a source that does not compile is refused with the compiler's message") {
    fresh_cache();
    try {
        neptune::ops::first_use_kernels("not CUDA at all", "sm_90a", "broken_probe");
        FAIL("compiled");
    } catch (const neptune::ops::FirstUseError &e) {
        CHECK(e.message.find("Neptune cannot compile its kernels") != std::string::npos);
        CHECK(e.message.find("broken_probe") != std::string::npos);
    }
}
