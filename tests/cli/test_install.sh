#!/usr/bin/env bash
# make install and make uninstall (issue 39): the built binary installed as
# DESTDIR/PREFIX/bin/grpo (PREFIX /usr/local unless given) with the README and docs
# under share/doc/grpo, the installed grpo runs (--version, help train), and
# uninstall removes what install wrote. The build is not remade (-o: the binary
# under test is the one installed).
set -u
. "$ROOT/tests/cli/lib.sh"
mk() { make --no-print-directory -C "$ROOT" BUILD="$BUILD" -o "$BUILD/grpo" "$@" > "$TMP/make.log" 2>&1 || fail "make $*: $(tail -n 5 "$TMP/make.log")"; }

mk install DESTDIR="$TMP/stage"
bin="$TMP/stage/usr/local/bin/grpo"
[ -x "$bin" ] || fail "no executable $bin"
[ "$("$bin" --version 2>&1)" = "$("$GRPO" --version)" ] || fail "installed --version: $("$bin" --version 2>&1)"
"$bin" help train | grep -q -- '^  --learning_rate N' || fail "installed grpo help train"
for f in README.md commands.md rewards.md; do
    [ -f "$TMP/stage/usr/local/share/doc/grpo/$f" ] || fail "docs: no share/doc/grpo/$f"
done
mk uninstall DESTDIR="$TMP/stage"
[ -e "$bin" ] && fail "uninstall left $bin"
[ -e "$TMP/stage/usr/local/share/doc/grpo" ] && fail "uninstall left share/doc/grpo"

# PREFIX chosen, and an install over an earlier one
mk install DESTDIR="$TMP/stage2" PREFIX=/opt/grpo
mk install DESTDIR="$TMP/stage2" PREFIX=/opt/grpo
[ -x "$TMP/stage2/opt/grpo/bin/grpo" ] || fail "PREFIX=/opt/grpo: no bin/grpo"
"$TMP/stage2/opt/grpo/bin/grpo" --version > /dev/null || fail "PREFIX=/opt/grpo: grpo --version"
finish
