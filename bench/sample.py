"""Where a vault command's threads spend their time: runs `vault ARGS...` in this process while a sampler thread
looks at every thread's stack every few milliseconds, then prints, per thread name, the lines (file:line function,
innermost vault frame, or the innermost frame outside vault) seen most often and their share of the samples.

    python bench/sample.py [--every-ms 5] [--top 12] [--json OUT] -- --catalog c.db restore env NAME ...

A line that calls into C (a hash update, a write, a decompress) stands for the time spent in that call. Threads
of one name (env-writer) are summed. Not a timer: ratios of samples, with the sampler's own cost (~1%)."""

from __future__ import annotations

import argparse
import collections
import json
import sys
import threading
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every-ms", type=float, default=5.0)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--json", help="write the counts here as JSON too")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    args = opts.args[1:] if opts.args[:1] == ["--"] else opts.args
    from cloudvault.cli.main import main as vault

    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    samples: collections.Counter = collections.Counter()
    done = threading.Event()

    def sample() -> None:
        me = threading.get_ident()
        names = {}
        while not done.wait(opts.every_ms / 1000):
            for thread in threading.enumerate():
                names[thread.ident] = thread.name.split("-")[0] if thread.name.startswith("Thread-") else thread.name
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                name = names.get(ident, str(ident))
                samples[name] += 1
                counts[name][_where(frame)] += 1

    sampler = threading.Thread(target=sample, name="sampler", daemon=True)
    sampler.start()
    start = time.monotonic()
    try:
        code = vault(args)
    finally:
        done.set()
        sampler.join()
    wall = time.monotonic() - start
    report = {name: {"samples": samples[name], "top": [[w, n, round(n / samples[name], 3)] for w, n in
                                                        counts[name].most_common(opts.top)]}
              for name in sorted(samples, key=samples.get, reverse=True)}  # fmt: skip
    print(f"wall {wall:.2f} s, exit {code}, a sample every {opts.every_ms} ms", file=sys.stderr)
    for name, got in report.items():
        print(f"== {name}: {got['samples']} samples", file=sys.stderr)
        for where, n, share in got["top"]:
            print(f"  {share:6.1%} {n:7d}  {where}", file=sys.stderr)
    if opts.json:
        with open(opts.json, "w") as fh:
            json.dump({"wall_s": wall, "exit": code, "threads": report}, fh, indent=1)
    return code


def _where(frame) -> str:
    """The innermost frame in vault's own code, with the innermost frame below it (what it is waiting on)."""
    inner = frame
    while frame is not None and "cloudvault" not in frame.f_code.co_filename:
        frame = frame.f_back
    own = frame or inner
    here = f"{own.f_code.co_filename.rsplit('cloudvault/', 1)[-1]}:{own.f_lineno} {own.f_code.co_name}"
    if own is not inner:
        here += f" > {inner.f_code.co_filename.rsplit('/', 1)[-1]}:{inner.f_lineno} {inner.f_code.co_name}"
    return here


if __name__ == "__main__":
    sys.exit(main())
