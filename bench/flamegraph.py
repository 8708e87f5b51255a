"""A flame graph (SVG) from `perf script` output: stacks folded per process, widths by
sample count, the root at the bottom. A small stand-in for Brendan Gregg's
stackcollapse-perf.pl + flamegraph.pl, which Debian does not package.

    perf script -i perf.data | python3 bench/flamegraph.py --title T > graph.svg
"""

import argparse
import collections
import html
import re
import sys

WIDTH, ROW, FONT = 1200, 16, 11
MIN_WIDTH = 0.3  # pixels; narrower frames are left out of the picture (not the counts)


FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.*?)(\+0x[0-9a-f]+)?\s+\((.*)\)$")


def fold(lines):
    """Counter of stacks (the thread's name, then frames from the outermost in) from
    perf script text: a header line per sample, a line per frame (innermost first), a
    blank line."""
    stacks = collections.Counter()
    thread, frames = None, []
    for line in list(lines) + [""]:
        line = line.rstrip("\n")
        if not line.strip():
            if thread is not None:
                stacks[(thread,) + tuple(reversed(frames))] += 1
            thread, frames = None, []
        elif line[0] in " \t":
            match = FRAME.match(line)
            if not match:
                continue
            symbol, dso = match.group(1), match.group(3)
            frames.append(f"[{dso.rsplit('/', 1)[-1]}]" if symbol == "[unknown]" else symbol)
        else:
            thread = line.split()[0]
    return stacks


def tree(stacks):
    root = {"name": "all", "count": 0, "children": {}}
    for stack, count in stacks.items():
        root["count"] += count
        node = root
        for frame in stack:
            node = node["children"].setdefault(frame, {"name": frame, "count": 0,
                                                       "children": {}})
            node["count"] += count
    return root


def depth(node):
    return 1 + max((depth(child) for child in node["children"].values()), default=0)


def color(name):
    h = sum(ord(c) for c in name)
    return f"rgb({205 + h % 50},{80 + h * 7 % 120},{40 + h * 3 % 50})"


def render(root, title):
    rows = depth(root)
    height = (rows + 2) * ROW + 20
    scale = WIDTH / max(root["count"], 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="monospace" font-size="{FONT}">',
           f'<text x="4" y="14" font-size="13">{html.escape(title)}</text>']

    def draw(node, x, level):
        w = node["count"] * scale
        if w < MIN_WIDTH:
            return
        y = height - (level + 1) * ROW
        share = 100 * node["count"] / max(root["count"], 1)
        label = f'{node["name"]} ({node["count"]} samples, {share:.1f}%)'
        out.append(f'<g><title>{html.escape(label)}</title>'
                   f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{ROW - 1}" '
                   f'fill="{color(node["name"])}"/>')
        chars = int(w / (FONT * 0.6))
        if chars >= 3:
            text = node["name"] if len(node["name"]) <= chars else node["name"][:chars - 2] + ".."
            out.append(f'<text x="{x + 2:.1f}" y="{y + ROW - 4}">{html.escape(text)}</text>')
        out.append("</g>")
        for child in sorted(node["children"].values(), key=lambda c: c["name"]):
            draw(child, x, level + 1)
            x += child["count"] * scale

    draw(root, 0.0, 0)
    out.append("</svg>")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--title", default="flame graph")
    parser.add_argument("--folded", help="also write the folded stacks here")
    args = parser.parse_args()
    stacks = fold(sys.stdin)
    if args.folded:
        with open(args.folded, "w") as out:
            for stack, count in stacks.most_common():
                out.write(";".join(stack) + f" {count}\n")
    sys.stdout.write(render(tree(stacks), args.title))


if __name__ == "__main__":
    main()
