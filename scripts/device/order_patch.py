#!/usr/bin/env python3
"""Deal a masked prefill kernel's blocks heaviest-first across heads, by hand, to measure it before
the compiler emits it.

  order_patch.py DUMP.cu OUT.cu HEADS_PER_SECTION [HEADS_IN_LAST_SECTION]

DUMP: a prefill kernel with a causal or window mask (NEPTUNE_DUMP_CUDA), whose grid is (query tiles,
heads, batch) and whose block x counts query tiles from the last (the heaviest of its head) down. The
hardware starts blocks in the order of their linear index, x fastest, so today a launch runs head 0's
tiles heavy to light, then head 1's, ..., and the last head's heaviest tile starts near the end of the
launch. Here the linear index is re-dealt: the (batch, head) rows are cut into sections of
HEADS_PER_SECTION (the K and V of a section should fit in L2), and within a section the heads take
turns, heaviest tile first. With HEADS_IN_LAST_SECTION, the last rows form one section of that many
(small sections for L2, one larger at the end for the tail). Run the result with NEPTUNE_CUDA_OVERRIDE=<folder of OUT.cu>."""
import sys


def main(src, dst, g, g_last=0):
    s = open(src).read()
    old = ("    const int q0 = (((grid_x - 1) - block_x) * 128);\n"
           "    const int h = block_y;\n"
           "    const int b = block_z;\n")
    if old not in s:
        sys.exit(f"order_patch: no heavy-first (tile, head, batch) mapping with 128-row tiles in {src}")
    new = (f"    const int sec_heads_ = {int(g)}, last_heads_ = {int(g_last)};\n"
           "    const int rows_ = gridDim.y * gridDim.z;\n"
           "    const int split_ = last_heads_ > 0 ? max(0, rows_ - last_heads_) : rows_;\n"
           "    int lin_ = block_x + grid_x * (block_y + gridDim.y * block_z), base_ = 0, sh_ = sec_heads_, n_ = split_;\n"
           "    if (lin_ >= split_ * grid_x) { lin_ -= split_ * grid_x; base_ = split_; sh_ = rows_ - split_; n_ = sh_; }\n"
           "    const int sec_ = lin_ / (sh_ * grid_x);\n"
           "    const int in_sec_ = lin_ - sec_ * sh_ * grid_x;\n"
           "    const int g_ = min(sh_, n_ - sec_ * sh_);\n"
           "    const int row_ = base_ + sec_ * sh_ + in_sec_ % g_;\n"
           "    const int q0 = (((grid_x - 1) - in_sec_ / g_) * 128);\n"
           "    const int h = row_ % int(gridDim.y);\n"
           "    const int b = row_ / int(gridDim.y);\n")
    open(dst, "w").write(s.replace(old, new))


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5) or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    main(*sys.argv[1:])
