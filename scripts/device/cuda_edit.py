"""Helpers of the device scripts that edit dumped CUDA by hand."""


def block_end(s, open_brace):
    """The index of the brace that closes the one at s[open_brace]."""
    depth = 0
    for i in range(open_brace, len(s)):
        depth += {"{": 1, "}": -1}.get(s[i], 0)
        if depth == 0:
            return i
    raise ValueError("unbalanced braces after offset %d" % open_brace)
