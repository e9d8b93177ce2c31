"""Input for the example application: sensor readings and orders as CSV files, page events in a Redis stream.

    python examples/app/make_data.py DIR [redis://127.0.0.1:6379/events]

Writes DIR/readings/*.csv and DIR/orders/*.csv (each file written under a temporary name and renamed into place,
as a producer should) and, with a Redis URL, appends the events to that stream (XADD, one field ``row`` holding a
CSV line). Deterministic: the same DIR content and the same entries every time."""

from __future__ import annotations

import os
import sys

START = 1_767_225_600  # 2026-01-01T00:00:00Z: event times of the example data


def _write(path: str, lines: list[str]) -> None:
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def _ts(second: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(START + second, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def readings(files: int = 6, per_file: int = 50) -> dict[str, list[str]]:
    out = {}
    for f in range(files):
        rows = []
        for i in range(per_file):
            t = f * per_file + i
            rows.append(f"s{t % 5},{(t * 37 % 1000) / 10:.1f},{_ts(t // 2)}")
        out[f"readings-{f:02d}.csv"] = rows
    return out


def orders(files: int = 4, per_file: int = 40) -> dict[str, list[str]]:
    out = {}
    for f in range(files):
        rows = [
            f"{f * per_file + i},c{(f * per_file + i) % 7},{(i * 13 % 50) + 0.5},{_ts(f * 10 + i)}"
            for i in range(per_file)
        ]
        out[f"orders-{f:02d}.csv"] = rows
    return out


def events(n: int = 300) -> list[str]:
    actions = ("view", "click", "buy")
    return [f"u{i % 11},{actions[i * 7 % 3]},{_ts(i // 3)}" for i in range(n)]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    root = argv[0]
    for sub, files in (("readings", readings()), ("orders", orders())):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
        for name, lines in files.items():
            _write(os.path.join(root, sub, name), lines)
    if len(argv) > 1:
        from adaptstream.connectors.redis import client, parse_url

        addr = parse_url(argv[1])
        r = client(addr)
        for line in events():
            r.xadd(addr.streams[0], {"row": line})
        r.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
