#!/usr/bin/env python3
"""Every relative link in the given markdown files points at a file that exists and,
with a #fragment, at a heading that file has (GitHub's anchors), and README.md (when
given) links every docs/ page given. Prints each broken link as FILE:LINE: TARGET (why)
and exits 1 if there is one.

Usage: check_links.py ROOT FILE.md...   (FILE relative to ROOT, the repository's root)
"""
import os
import re
import sys

LINK = re.compile(r'!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')
FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$')
CODE_SPAN = re.compile(r'(`+)(.+?)\1')


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    in_fence = False
    for number, line in enumerate(text.split('\n'), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield number, line


def anchor(heading):
    """GitHub's anchor of a heading: markup gone, lower case, punctuation dropped,
    spaces to '-'."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', text)  # a link keeps its text
    text = re.sub(r'<[^>]+>', '', text)                     # inline HTML
    text = text.strip().lower()
    text = ''.join(c for c in text if c.isalnum() or c in ' -_')
    return text.replace(' ', '-')


def anchors(path):
    found, seen = set(), {}
    with open(path, encoding='utf-8') as f:
        for _, line in prose_lines(f.read()):
            m = HEADING.match(line)
            if not m:
                continue
            base = anchor(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else '%s-%d' % (base, n))
    return found


def broken_links(root, name, counted):
    path = os.path.join(root, name)
    with open(path, encoding='utf-8') as f:
        text = f.read()
    for number, line in prose_lines(text):
        line = CODE_SPAN.sub('``', line)  # a link in a code span is text
        for m in LINK.finditer(line):
            target = m.group(1)
            counted.append(target)
            if not target or re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):
                continue  # http:, https:, mailto: ...
            file_part, _, fragment = target.partition('#')
            if file_part.startswith('/'):
                yield number, target, 'absolute path; use a relative one'
                continue
            resolved = os.path.normpath(
                os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if os.path.relpath(resolved, root).startswith('..'):
                yield number, target, 'outside the repository'
                continue
            if not os.path.exists(resolved):
                yield number, target, 'no such file'
                continue
            if fragment and resolved.endswith('.md') and fragment not in anchors(resolved):
                yield number, target, 'no heading with anchor #' + fragment


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    root, names = argv[1], argv[2:]
    broken = 0
    links = []
    from_readme = None
    for name in names:
        counted = []
        for number, target, why in broken_links(root, name, counted):
            print('%s:%d: %s (%s)' % (name, number, target, why))
            broken += 1
        links += counted
        if name == 'README.md':
            from_readme = {t.partition('#')[0] for t in counted}
    # README.md links every page of the reference.
    for name in names:
        if from_readme is not None and name.startswith('docs/') and name not in from_readme:
            print('README.md: no link to %s' % name)
            broken += 1
    print('%d markdown files, %d links (%d relative), %d broken' % (
        len(names), len(links),
        sum(1 for t in links if not re.match(r'^[a-z][a-z0-9+.-]*:', t, re.I)), broken))
    return 1 if broken else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
