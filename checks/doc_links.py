#!/usr/bin/env python3
"""Every link of the user documents leads somewhere: the built guide and the Markdown files beside it.

    checks/doc_links.py --html target/book README.md BENCHMARKS.md …
    checks/doc_links.py --self-test

In the built HTML (`--html DIR`), each relative `href` or `src` must name a file inside DIR, and each
`#fragment` an element id of the page it leads to. In a Markdown file, each relative link must name a
file or folder of the repository, and a `#fragment` into a Markdown file one of its headings (as GitHub
makes their anchors). Links to other sites are not followed: CI has no network, and a dead one there is
no defect of this repository. Exits 1 with one line per broken link.
"""

import html.parser
import os
import re
import sys
import tempfile
import urllib.parse


class _Page(html.parser.HTMLParser):
    """The ids a page defines and the links it makes."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            elif name in ("href", "src") and value is not None:
                self.links.append(value)


def _parse(path):
    page = _Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    return page


def _local(link):
    """The path and fragment of a link inside the site, or None for another site's or a page's own top."""
    parsed = urllib.parse.urlsplit(link)
    if parsed.scheme or parsed.netloc or link.startswith("//"):
        return None
    return urllib.parse.unquote(parsed.path), urllib.parse.unquote(parsed.fragment)


def check_html(root):
    """Broken links of every page under root, as (page, link, why)."""
    root = os.path.realpath(root)
    pages = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                pages[path] = _parse(path)
    if not pages:
        return [(root, "", "no HTML page here: build the guide first")]
    broken = []
    for path, page in sorted(pages.items()):
        for link in page.links:
            local = _local(link)
            if local is None:
                continue
            target, fragment = local
            if target.startswith("/"):
                # The site's root (the 404 page links there): the guide is served from its own.
                dest = os.path.realpath(os.path.join(root, target.lstrip("/")))
            elif target == "":
                dest = path
            else:
                dest = os.path.realpath(os.path.join(os.path.dirname(path), target))
            if os.path.isdir(dest):
                dest = os.path.join(dest, "index.html")
            if not (dest == root or dest.startswith(root + os.sep)):
                broken.append((path, link, "leads out of the built guide"))
            elif not os.path.exists(dest):
                broken.append((path, link, "no such file"))
            elif fragment and dest.endswith(".html") and fragment not in pages[dest].ids:
                broken.append((path, link, "no such anchor"))
    return broken


_MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _markdown_lines(path):
    """The lines of a Markdown file outside its code blocks, with their numbers."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if _FENCE.match(line):
                fenced = not fenced
            elif not fenced:
                yield number, line


def github_anchor(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path):
    seen = {}
    anchors = set()
    for _, line in _markdown_lines(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = github_anchor(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            anchors.add(base if n == 0 else f"{base}-{n}")
    return anchors


def check_markdown(path):
    """Broken relative links of one Markdown file, as (file:line, link, why)."""
    broken = []
    for number, line in _markdown_lines(path):
        for link in _MD_LINK.findall(re.sub(r"`[^`]*`", "", line)):
            local = _local(link)
            if local is None:
                continue
            target, fragment = local
            where = f"{path}:{number}"
            dest = path if target == "" else os.path.normpath(os.path.join(os.path.dirname(path), target))
            if not os.path.exists(dest):
                broken.append((where, link, "no such file"))
            elif fragment and dest.endswith(".md") and fragment not in _anchors(dest):
                broken.append((where, link, "no such heading"))
    return broken


def _self_test():
    """The check finds what it is for: a missing page, a missing anchor, a way out, a dead Markdown link."""
    with tempfile.TemporaryDirectory() as tmp:
        book = os.path.join(tmp, "book")
        os.makedirs(book)
        with open(os.path.join(book, "a.html"), "w") as f:
            f.write('<h1 id="top">A</h1><a href="b.html#there">ok</a><a href="b.html#gone">x</a>'
                    '<a href="missing.html">x</a><a href="../outside.html">x</a>'
                    '<a href="https://example.org/">other site</a><a href="#top">self</a>')
        with open(os.path.join(book, "b.html"), "w") as f:
            f.write('<p id="there">B</p>')
        found = sorted(why for _, _, why in check_html(book))
        assert found == ["leads out of the built guide", "no such anchor", "no such file"], found
        doc = os.path.join(tmp, "README.md")
        with open(doc, "w") as f:
            f.write("# Two words\n[ok](#two-words) [bad](#three) [file](nowhere.md)\n"
                    "```\n[in code](nowhere.md)\n```\n`[in a span](nowhere.md)`\n")
        found = sorted(why for _, _, why in check_markdown(doc))
        assert found == ["no such file", "no such heading"], found
    assert github_anchor("The overview: `--stats`") == "the-overview---stats"
    print("doc_links self-test: passed")


def main(argv):
    if argv == ["--self-test"]:
        _self_test()
        return 0
    broken = []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--html":
            broken += check_html(args.pop(0))
        else:
            broken += check_markdown(arg)
    for where, link, why in broken:
        print(f"{where}: {link}: {why}")
    if broken:
        print(f"{len(broken)} broken links", file=sys.stderr)
        return 1
    print("doc links: all lead somewhere")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
