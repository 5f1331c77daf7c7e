#!/usr/bin/env python3
"""tools/alloc_sites.py BINARY [STEPS] < SITES

Names the call sites of a steady GRPO step's allocations. SITES is what
tests/grpo/test_step_alloc prints to stderr with GRPO_ALLOC_SITES=1 set: per mode, lines
"calls bytes object+offset ..." (the frames from malloc's caller outwards, over the
counted steps). BINARY is the test binary that printed them (build/tests/grpo/test_step_alloc);
STEPS the steps counted (5 there: steps 3..7).

Each site is grouped by the innermost frame in BINARY (grpo.c's code, the library being
linked in statically) and the frame just inside it (the library function, or "direct" where
grpo.c called malloc itself), and the groups are printed largest first with their calls and
KiB per step. Frames in BINARY are named by addr2line (function@file:line); frames in shared
libraries by the nearest exported symbol below them (nm -D), which for a library without
debug symbols is only a landmark: its offset is printed too.

    GRPO_ALLOC_SITES=1 build/tests/grpo/test_step_alloc 2> sites.txt
    tools/alloc_sites.py build/tests/grpo/test_step_alloc 5 < sites.txt
"""
import bisect
import collections
import os
import re
import subprocess
import sys


def shared_libraries(binary):
    """basename -> path of each library the binary loads (ldd)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    libs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>":
            libs[os.path.basename(parts[0])] = parts[2]
    return libs


class Namer:
    """object+offset -> a readable name, cached."""

    def __init__(self, binary):
        self.binary, self.base = binary, os.path.basename(binary)
        self.libs = shared_libraries(binary)
        self.symbols, self.names = {}, {}

    def exported(self, path):
        if path not in self.symbols:
            out = subprocess.run(["nm", "-D", "--defined-only", "-C", path], capture_output=True, text=True).stdout
            rows = []
            for line in out.splitlines():
                m = re.match(r"([0-9a-f]+) [tTwWi] (.*)", line)
                if m:
                    rows.append((int(m.group(1), 16), m.group(2)))
            rows.sort()
            self.symbols[path] = ([a for a, _ in rows], [n for _, n in rows])
        return self.symbols[path]

    def name(self, frame):
        if frame in self.names:
            return self.names[frame]
        name = frame
        m = re.match(r"(.+)\+(0x[0-9a-f]+)$", frame)
        if m and m.group(1) == self.base:
            # a return address: the call is the byte before it
            out = subprocess.run(["addr2line", "-f", "-s", "-e", self.binary, hex(int(m.group(2), 16) - 1)],
                                 capture_output=True, text=True).stdout.split("\n")
            if len(out) >= 2:
                name = "%s@%s" % (out[0], out[1].split(" ")[0])
        elif m and m.group(1) in self.libs:
            addrs, names = self.exported(self.libs[m.group(1)])
            i = bisect.bisect_right(addrs, int(m.group(2), 16)) - 1
            near = names[i][:48] if i >= 0 else "?"
            name = "%s:%s(+%s)" % (m.group(1).split(".")[0], near, m.group(2))
        self.names[frame] = name
        return name

    def group(self, frames):
        ours = [i for i, f in enumerate(frames) if f.startswith(self.base + "+")]
        if not ours:
            return " <- ".join(self.name(f) for f in frames[:4])
        i = ours[0]
        inner = self.name(frames[i - 1]) if i > 0 else "direct"
        return inner + " <- " + " <- ".join(self.name(f) for f in frames[i:i + 3])


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    namer = Namer(sys.argv[1])
    steps = float(sys.argv[2]) if len(sys.argv) == 3 else 5.0
    modes = collections.OrderedDict()
    mode = None
    for line in sys.stdin:
        if "call sites of steps" in line:
            mode = line.split(": call sites")[0]
            modes[mode] = (collections.Counter(), collections.Counter())
            continue
        parts = line.split()
        if mode is None or len(parts) < 3 or not parts[0].isdigit():
            continue
        key = namer.group(parts[2:])
        modes[mode][0][key] += int(parts[0])
        modes[mode][1][key] += int(parts[1])
    for mode, (calls, nbytes) in modes.items():
        print("== %s: %.0f allocations, %.0f KiB a step" % (mode, sum(calls.values()) / steps,
                                                           sum(nbytes.values()) / steps / 1024))
        for key, n in calls.most_common(25):
            print("  %8.1f %9.1f KiB  %s" % (n / steps, nbytes[key] / steps / 1024, key))


if __name__ == "__main__":
    main()
