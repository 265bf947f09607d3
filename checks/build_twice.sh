#!/usr/bin/env bash
# A second `cargo build` compiles nothing: neither `git status` (which rewrites the index) nor a checkout
# without `.git/packed-refs` makes the inspector's build script run again, and a new commit does (the
# stamp `asyncdump --version` prints follows the commit).
#
# Checked here, after a first build, and in two throwaway clones of HEAD, one with packed-refs (as `git
# clone` makes) and one without (as `git init` and `git fetch` make). Each clone has a target directory
# of its own: cargo keys a workspace's units by their paths relative to its root, so two checkouts
# sharing one would take each other's build-script runs for their own.
# Usage: checks/build_twice.sh (after `cargo build`/`cargo test`; about two minutes on a 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
# Prints the workspace units cargo compiled again (not `fresh`), one a line.
compiled() {
    cargo "$@" --locked --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and not message["fresh"]:
        print(message["target"]["name"], message["target"]["kind"])
'
}

# Fails with what was compiled when a build after `git status` compiles anything.
fresh_after_status() {
    local where=$1
    shift
    touch "$(git rev-parse --git-dir)/index"
    git status --short >/dev/null
    local again
    again=$(compiled "$@")
    if [ -n "$again" ]; then
        echo "build_twice: $where: a second \`cargo $*\` compiled again:" >&2
        echo "$again" >&2
        exit 1
    fi
}

# Fails when a new commit does not run the build script again.
rebuilt_after_commit() {
    local where=$1
    shift
    git -c user.name=check -c user.email=check@localhost commit -q --allow-empty -m "another commit"
    local again
    again=$(compiled "$@")
    if ! grep -q '^asyncdump ' <<<"$again"; then
        echo "build_twice: $where: a new commit did not build the inspector again (its stamp is stale)" >&2
        exit 1
    fi
}

compiled build --workspace >/dev/null
fresh_after_status "this checkout" build --workspace

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git clone -q --no-hardlinks . "$scratch/packed"
git init -q "$scratch/loose"
git -C "$scratch/loose" fetch -q "$PWD" HEAD
git -C "$scratch/loose" checkout -q -b main FETCH_HEAD
[ -f "$scratch/packed/.git/packed-refs" ] && [ ! -e "$scratch/loose/.git/packed-refs" ]

for kind in packed loose; do
    (
        cd "$scratch/$kind"
        export CARGO_TARGET_DIR="$scratch/target-$kind"
        compiled check -p asyncdump --lib >/dev/null
        fresh_after_status "a clone with refs $kind" check -p asyncdump --lib
        rebuilt_after_commit "a clone with refs $kind" check -p asyncdump --lib
        fresh_after_status "a clone with refs $kind, after a commit" check -p asyncdump --lib
    )
done
echo "build_twice: a second build compiles nothing (here, with packed-refs and without); a commit builds again"
