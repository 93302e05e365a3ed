#!/usr/bin/env python3
"""Every relative link of the repository's Markdown (README.md, docs/**/*.md) points at a
file that exists and, where it names an anchor (#...), at a heading of that file that
makes the anchor (GitHub's rule: lower case, punctuation dropped, spaces to hyphens).
The docs are split into pages (docs/layers/<layer>.md, docs/domains/, docs/validating-fla/,
docs/proof-checks/); a page moved or a heading renamed must not leave a dead link.

    check_links.py REPOSITORY_ROOT

Prints each dead link as FILE: LINK (why) and exits 1 if there is one."""
import pathlib
import re
import sys

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def anchors(path: pathlib.Path) -> set[str]:
    out, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        if fenced or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def main() -> int:
    root = pathlib.Path(sys.argv[1]).resolve()
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    dead, seen = [], 0
    for page in pages:
        fenced = False
        for line in page.read_text(encoding="utf-8").splitlines():
            if FENCE.match(line):
                fenced = not fenced
            if fenced:
                continue
            for m in LINK.finditer(line):
                link = m.group(1)
                if re.match(r"^[a-z]+:", link):  # http:, https:, mailto:
                    continue
                seen += 1
                path, _, anchor = link.partition("#")
                target = (page.parent / path).resolve() if path else page
                if not target.exists():
                    dead.append(f"{page.relative_to(root)}: {link} (no such file)")
                elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                    dead.append(f"{page.relative_to(root)}: {link} (no heading makes #{anchor})")
    for d in dead:
        print(d)
    print(f"check_links: {seen} relative links in {len(pages)} pages, {len(dead)} dead")
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main())
